//go:build dpdk

package mempool

import (
	"fmt"
	"os"
	"testing"

	"github.com/metaroce/metaroce/dpdk"
)

// TestMain starts a real EAL (no hugepages, unique file prefix) with a
// ring loopback port for the external-buffer tests.
func TestMain(m *testing.M) {
	args := []string{"--lcores", "0@(0-1)", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrpool%d", os.Getpid()), "--log-level", "lib.eal:error", "--vdev", "net_ring0"}
	if _, err := dpdk.Init(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "EAL cleanup:", err)
		code = 1
	}
	os.Exit(code)
}
