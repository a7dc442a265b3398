// Package binary builds the metaroce command once per test binary, so
// tests can run it exactly as a user would, and gives each test its own
// loopback addresses and free ports.
package binary

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	dir  string
	bErr error
	bOut []byte
)

// Build returns the path of a freshly built metaroce binary, with the
// build tags the tests were built with (DPDK).
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, bErr = os.MkdirTemp("", "metaroce-bin-")
		if bErr != nil {
			return
		}
		path = filepath.Join(dir, "metaroce")
		cmd := exec.Command("go", append(append([]string{"build"}, buildTags...), "-o", path, "github.com/metaroce/metaroce/cmd/metaroce")...)
		bOut, bErr = cmd.CombinedOutput()
	})
	if bErr != nil {
		t.Fatalf("go build: %v\n%s", bErr, bOut)
	}
	return path
}

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// LoopbackPair returns two addresses in a random 127.x.y.0/24, so that
// tests running at once never share a UDP port: the server's and the
// client's endpoint addresses.
func LoopbackPair() (string, string) {
	x, y := 1+rand.IntN(250), 1+rand.IntN(250)
	return fmt.Sprintf("127.%d.%d.1", x, y), fmt.Sprintf("127.%d.%d.2", x, y)
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
