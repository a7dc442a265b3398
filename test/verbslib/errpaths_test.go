package verbslib_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// buildC compiles libverbs/ctest/name.c against <infiniband/verbs.h> and
// the built library and returns the binary's path.
func buildC(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cc := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", bin,
		"../../libverbs/ctest/"+name+".c", "-L"+dir, "-l:libibverbs.so.1")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s.c: %v\n%s", name, err, out)
	}
	return bin
}

// TestErrorPaths runs ctest/errpaths.c once per case: a requester and a
// responder process (forked before either opens its device, both on
// 127.0.0.1, told apart by their UDP ports), each case bounded in time.
// A case passes when the program's own checks all pass (at least min of
// them) and it printed what it saw: the lines in want, as regexps.
func TestErrorPaths(t *testing.T) {
	dir := libDir(t)
	bin := buildC(t, dir, "errpaths")
	summary := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`)
	cases := []struct {
		name string
		min  int
		want []string
	}{
		{"rkey", 7, []string{`write status remote access error`, `read status remote access error`, `target memory unchanged`}},
		{"oob", 7, []string{`write status remote access error`, `read status remote access error`, `target memory unchanged`}},
		{"len", 5, []string{`responder status local length error`, `requester status remote invalid request error`}},
		{"rnr7", 6, []string{`status success after \d+ ms`}},
		{"kill", 4, []string{`status transport retry counter exceeded after (\d+) ms`}},
		{"destroy", 10, []string{`the other QP completed 2/2`, `surviving QP received: success`}},
		{"dereg", 6, []string{`(\d+) WRITEs succeeded before the dereg, (\d+) failed REM_ACCESS_ERR after`,
			`canary after the dereg: intact`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.name)
			cmd.Env = withLib(dir, "METAROCE_VERBS_IP=127.0.0.1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("errpaths %s: %v\n%s%s", c.name, err, out, stderr.String())
			}
			m := summary.FindSubmatch(out)
			if m == nil {
				t.Fatalf("no clean summary:\n%s%s", out, stderr.String())
			}
			if n, _ := strconv.Atoi(string(m[1])); n < c.min {
				t.Fatalf("%d checks ran, want at least %d:\n%s", n, c.min, out)
			}
			for _, w := range c.want {
				re := regexp.MustCompile(`(?m)^case ` + c.name + `: .*` + w)
				s := re.FindSubmatch(out)
				if s == nil {
					t.Fatalf("no line matching %q:\n%s%s", w, out, stderr.String())
				}
				// The figures a case prints must be positive counts.
				for _, f := range s[1:] {
					if n, _ := strconv.Atoi(string(f)); n <= 0 {
						t.Fatalf("%q: count %s:\n%s", w, f, out)
					}
				}
			}
			t.Logf("%s", out)
		})
	}
}
