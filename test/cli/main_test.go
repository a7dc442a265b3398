// Package cli runs the built metaroce binary as a user would: perf server
// and client over loopback UDP, bench with injected loss, config errors.
package cli

import (
	"os"
	"testing"

	"github.com/metaroce/metaroce/test/internal/binary"
)

func TestMain(m *testing.M) {
	code := m.Run()
	binary.Cleanup()
	os.Exit(code)
}
