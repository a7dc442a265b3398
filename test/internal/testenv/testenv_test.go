package testenv

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// fakeTB records how a helper stopped the test instead of stopping it.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

type stop struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	panic(stop{})
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	panic(stop{})
}

func call(f *fakeTB, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
		}
	}()
	fn()
}

// A missing tool skips a plain run and fails under MR_REQUIRE_ALL=1; a
// present one is returned in both.
func TestUnavailableSkipsOrFails(t *testing.T) {
	const missing = "metaroce-no-such-tool"
	for _, strict := range []string{"", "1"} {
		t.Setenv(RequireAllEnv, strict)
		f := &fakeTB{TB: t}
		call(f, func() { Tool(f, missing, "nowhere") })
		if strict == "1" {
			if f.failed == "" || f.skipped != "" {
				t.Fatalf("strict: want a failure, got skip %q fail %q", f.skipped, f.failed)
			}
		} else if f.skipped == "" || f.failed != "" || !strings.Contains(f.skipped, missing) {
			t.Fatalf("plain: want a skip naming %s, got skip %q fail %q", missing, f.skipped, f.failed)
		}
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(RequireAllEnv, "1")
	f := &fakeTB{TB: t}
	if got := Tool(f, "sh", "coreutils"); got != sh || f.failed != "" {
		t.Fatalf("Tool(sh) = %q, failed %q", got, f.failed)
	}
}
