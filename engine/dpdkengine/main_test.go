//go:build dpdk

package dpdkengine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/dpdk"
)

// memifPairs is how many memif pairs the test EAL has: pair k is
// net_memif<2k> (server) and net_memif<2k+1> (client) on their own socket.
const memifPairs = 16 // pairs 0..5: transfer, impaired, bad input, lcore, telemetry, rocev2; 6..9: property scenarios; 10, 11: planes; 12: backend; 13: asymmetric ends (udp checksum zero, ack flush); 14: time split; 15: idle waits (RTE_MAX_ETHPORTS is 32: pair 1 also runs zero-copy TX)

// TestMain starts one real EAL for the package (rte_eal_init runs once per
// process) with memif pairs whose sockets live in a temporary directory,
// no hugepages, and a file prefix unique to this process.
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dpdkengine")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	args := []string{"--lcores", "0@(0-1),1@(0-1),2@(0-1)", "--no-huge", "-m", "1024", "--no-pci",
		"--file-prefix", fmt.Sprintf("mreng%d", os.Getpid()), "--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error"}
	for k := 0; k < memifPairs; k++ {
		sock := filepath.Join(dir, fmt.Sprintf("memif%d.sock", k))
		extra := ""
		if k == zcBenchPair {
			// BenchmarkZeroCopyTX's frames (up to 8 KiB of payload, a
			// data_room of 9216+128) fit one memif buffer: the engine
			// refuses a memif port whose bsize is below its mbufs' data,
			// since DPDK 22.11's memif corrupts frames spread over
			// several buffers (docs/dpdk.md).
			extra = ",bsize=9216"
		}
		args = append(args,
			"--vdev", fmt.Sprintf("net_memif%d,role=server,id=0,socket=%s%s", 2*k, sock, extra),
			"--vdev", fmt.Sprintf("net_memif%d,role=client,id=0,socket=%s%s", 2*k+1, sock, extra))
	}
	if _, err := dpdk.Init(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		return 1
	}
	code := m.Run()
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "EAL cleanup:", err)
		code = 1
	}
	return code
}
