//go:build dpdk

package verbslib_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

var dpdkSeq atomic.Int64

// memifProfile writes the profile of one end of a memif pair for the
// library: backend dpdk, an EAL of its own (--no-huge, a file prefix no
// other process uses, removed when the test ends: a process that exits
// leaves the EAL's runtime directory behind), the memif socket in dir.
func memifProfile(t *testing.T, dir, role, ip string) string {
	t.Helper()
	prefix := fmt.Sprintf("mrverbs%d-%d-%s", os.Getpid(), dpdkSeq.Add(1), role)
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", prefix)) })
	p := filepath.Join(dir, role+".yaml")
	body := fmt.Sprintf(`name: verbs-memif-%[1]s
backend: dpdk
dpdk:
  eal: ["--lcores", "0@(0-1)", "--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%[2]s",
        "--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error",
        "--vdev", "net_memif0,role=%[1]s,id=0,socket=%[3]s"]
  ports:
    - name: net_memif0
      ip: %[4]s/24
  pool_size: 4095
metaroce:
  mtu: 1024
rocev2:
  mtu: 1024
`, role, prefix, filepath.Join(dir, "memif.sock"), ip)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDPDKMemif: the same unmodified ib_write_bw pair over the DPDK
// backend, two processes joined by a memif pair (each its own EAL), for
// both transports; the perftest exchange runs over TCP on loopback, the
// data over memif, and the GIDs are the DPDK ports' addresses.
func TestDPDKMemif(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\s*65536\s+200\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
	gid := regexp.MustCompile(`(?m)^\s*GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:98:00:0([12])$`)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"METAROCE_TRANSPORT=" + tr}
			s, c := pairRun(t, "ib_write_bw", "127.0.0.1",
				append([]string{"METAROCE_PROFILE=" + memifProfile(t, dir, "server", "10.98.0.1")}, env...),
				append([]string{"METAROCE_PROFILE=" + memifProfile(t, dir, "client", "10.98.0.2")}, env...),
				"-F", "-n", "200")
			for side, out := range map[string]string{"server": s, "client": c} {
				m := row.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("%s: no result row:\n%s", side, out)
				}
				if bw, _ := strconv.ParseFloat(m[2], 64); !(bw > 0) {
					t.Fatalf("%s: average bandwidth %s MB/s:\n%s", side, m[2], out)
				}
				if g := gid.FindAllStringSubmatch(out, -1); len(g) != 2 || g[0][1] == g[1][1] {
					t.Fatalf("%s: the GIDs are not the memif ports' 10.98.0.1 and .2:\n%s", side, out)
				}
				// The engine's pool, in the EAL's memory: the data path ran
				// on DPDK, not on a socket.
				if !strings.Contains(out, "is in anonymous memory (--no-huge)") {
					t.Fatalf("%s: no sign of the DPDK engine's mbuf pool:\n%s", side, out)
				}
			}
			t.Logf("ib_write_bw over %s, dpdk memif: %s", tr, row.FindString(c))
		})
	}
}
