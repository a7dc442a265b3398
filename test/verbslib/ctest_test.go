package verbslib_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runC compiles libverbs/ctest/name.c against <infiniband/verbs.h> (and
// the library's private header, for layout.c), links it with the built
// library, runs it and returns how many checks passed; it fails t unless
// the program ends "N passed, 0 failed" with N >= min. The program's
// stderr is returned too.
func runC(t *testing.T, name string, min int) string {
	t.Helper()
	dir := libDir(t)
	bin := filepath.Join(t.TempDir(), name)
	cc := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I../../cgo", "-o", bin,
		"../../libverbs/ctest/"+name+".c", "-L"+dir, "-l:libibverbs.so.1")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s.c: %v\n%s", name, err, out)
	}
	run := exec.Command(bin)
	run.Env = withLib(dir)
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", name, err, out, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s printed no clean summary:\n%s%s", name, out, stderr.String())
	}
	if n, _ := strconv.Atoi(string(m[1])); n < min {
		t.Fatalf("%s ran %d checks; expected at least %d:\n%s", name, n, min, out)
	}
	return stderr.String()
}

// TestLayout: the installed header is v44's ABI, the library's private
// objects embed the public structs first, and an opened context has its
// tables where the header's inlines look (ctest/layout.c).
func TestLayout(t *testing.T) { runC(t, "layout", 100) }

// TestFork: a child forked after the device was opened is refused with a
// message naming fork; a child forked before, and fork+exec, open it
// (ctest/fork.c).
func TestFork(t *testing.T) {
	stderr := runC(t, "fork", 6)
	if !strings.Contains(stderr, "forked after the transport started") {
		t.Fatalf("the refused child printed no reason:\n%s", stderr)
	}
}

// TestNotify: a CQ armed while it holds completions raises its event at
// once (perftest's -e loops arm and then poll one completion), one armed
// empty raises one event at the next completion and none before, and
// polling an empty CQ returns 0 promptly through the library's poll wait
// (ctest/notify.c).
func TestNotify(t *testing.T) { runC(t, "notify", 220) }
