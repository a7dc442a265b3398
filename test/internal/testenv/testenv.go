// Package testenv decides what a test does when this machine lacks
// something it needs (root, a namespace, a tool such as tshark).
//
// A plain `go test` by a non-root user on a bare machine skips such a
// test: it cannot run here, and that is not a fault of the code. `make
// test` (and so CI) sets MR_REQUIRE_ALL=1, where the same absence is a
// failure: make test installs every dependency and runs as root, so a
// test that skips there would pass without having run.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireAllEnv is the variable `make test` sets; "1" turns skips for a
// missing environment into failures.
const RequireAllEnv = "MR_REQUIRE_ALL"

// Strict reports whether the environment must provide everything (the
// variable RequireAllEnv is "1").
func Strict() bool { return os.Getenv(RequireAllEnv) == "1" }

// Unavailable stops t because the machine lacks what the test needs:
// t.Skip normally, t.Fatal when Strict. The message says what is missing
// and how to get it.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("%s (%s=1: required, not skipped)", msg, RequireAllEnv)
	}
	t.Skip(msg)
}

// Root stops t (see Unavailable) unless the test runs as root; what
// names what root is needed for (network namespaces, tap devices...).
func Root(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root (%s)", what)
	}
}

// Tool returns the path of the executable name, or stops t (see
// Unavailable) naming how to install it (install, e.g. "Debian package
// tshark; run scripts/install-deps.sh").
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s not installed (%s)", name, install)
	}
	return p
}
