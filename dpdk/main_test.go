//go:build dpdk

package dpdk

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// memifSock is the memif control socket of the in-process memif pair the
// tests use (server net_memif0, client net_memif1). A second pair
// (net_memif2, net_memif3) with memif's default 2 KiB buffers and a third
// (net_memif4, net_memif5) with 4 KiB ones are TestMemifMultiBuffer's.
var memifSock string

// TestMain starts one real EAL for the package (rte_eal_init runs once per
// process): no hugepages, in memory, a unique file prefix, a ring loopback
// port and a memif pair whose socket lives in a temporary directory.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dpdktest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	memifSock = filepath.Join(dir, "memif.sock")
	args := []string{"-l", "0", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrdpdk%d", os.Getpid()), "--log-level", "lib.eal:error",
		"--vdev", "net_ring0",
		"--vdev", "net_memif0,role=server,id=0,socket=" + memifSock,
		"--vdev", "net_memif1,role=client,id=0,socket=" + memifSock,
		"--vdev", "net_memif2,role=server,id=0,socket=" + filepath.Join(dir, "memif2.sock"),
		"--vdev", "net_memif3,role=client,id=0,socket=" + filepath.Join(dir, "memif2.sock"),
		"--vdev", "net_memif4,role=server,id=0,bsize=4096,socket=" + filepath.Join(dir, "memif4.sock"),
		"--vdev", "net_memif5,role=client,id=0,bsize=4096,socket=" + filepath.Join(dir, "memif4.sock"),
	}
	if _, err := Init(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		return 1
	}
	code := m.Run()
	if err := Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "EAL cleanup:", err)
		code = 1
	}
	return code
}
