package verbslib_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// Debian's library, the reference ABI (package libibverbs1).
const debianLib = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  string
)

// libDir builds the library (make verbs: quick when up to date) and returns
// the absolute path of build/verbs. A machine without make or gcc stops
// the test (testenv.Unavailable: a failure under make test).
func libDir(t *testing.T) string {
	t.Helper()
	testenv.Tool(t, "make", "Debian package make; run scripts/install-deps.sh")
	testenv.Tool(t, "gcc", "Debian package gcc; run scripts/install-deps.sh")
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		testenv.Unavailable(t, "<infiniband/verbs.h> missing (Debian package libibverbs-dev; run scripts/install-deps.sh)")
	}
	buildOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			buildErr = err.Error()
			return
		}
		out, err := exec.Command("make", "-s", "-C", root, "verbs").CombinedOutput()
		if err != nil {
			buildErr = "make verbs: " + err.Error() + "\n" + string(out)
			return
		}
		buildDir = filepath.Join(root, "build", "verbs")
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return buildDir
}

// withLib is env plus LD_LIBRARY_PATH=dir, so that a program loads the
// built libibverbs.so.1 instead of Debian's.
func withLib(dir string, env ...string) []string {
	out := []string{"LD_LIBRARY_PATH=" + dir}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LD_LIBRARY_PATH=") && !strings.HasPrefix(e, "METAROCE_") {
			out = append(out, e)
		}
	}
	return append(out, env...)
}
