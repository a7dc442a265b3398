//go:build dpdk

package memifraw

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/dpdk"
)

// Two memif pairs: pair 0 (net_memif0/1) for the raw baseline, pair 1
// (net_memif2/3) for the metaroce engines.
var hugepages bool

// atExit runs after the tests, before rte_eal_cleanup (ports must be
// stopped first).
var atExit []func()

func TestMain(m *testing.M) { os.Exit(run(m)) }

// freeHugepages reads HugePages_Free from /proc/meminfo.
func freeHugepages() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "HugePages_Free:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func run(m *testing.M) int {
	if code, ok := runInNamespace(); ok { // MR_RAW_AFPACKET=1: the whole run goes inside
		return code
	}
	dir, err := os.MkdirTemp("", "memifraw")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	args := []string{"--lcores", "0@(0-1)", "--no-pci", "--no-telemetry", "--file-prefix", fmt.Sprintf("mrraw%d", os.Getpid()),
		"--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error"}
	// With MR_HUGE=1 (make bench-dpdk, after scripts/setup-hugepages.sh)
	// the EAL uses 2 MiB hugepages when enough are free; otherwise, and in
	// make test, it runs without (so parallel test processes never compete
	// for the reservation).
	if os.Getenv("MR_HUGE") == "1" && freeHugepages() >= 400 {
		hugepages = true
		args = append(args, "--in-memory", "-m", "768")
	} else {
		args = append(args, "--no-huge", "-m", "768")
	}
	for k := 0; k < 2; k++ {
		sock := filepath.Join(dir, fmt.Sprintf("memif%d.sock", k))
		args = append(args,
			"--vdev", fmt.Sprintf("net_memif%d,role=server,id=0,socket=%s", 2*k, sock),
			"--vdev", fmt.Sprintf("net_memif%d,role=client,id=0,socket=%s", 2*k+1, sock))
	}
	args = append(args, afpacketVdevs()...)
	if _, err := dpdk.Init(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		return 1
	}
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "EAL cleanup:", err)
		code = 1
	}
	return code
}
