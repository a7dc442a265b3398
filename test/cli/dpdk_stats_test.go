//go:build dpdk

package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestDPDKStatsMemif: bench over the DPDK backend (two memif ports of one
// EAL) with --metrics-addr, read by `metaroce stats` while it runs. The
// metaroce_backend_* series come from the DPDK engine's counters: frames
// sent and received, and the frames its impairment stage dropped (issue
// 13 found every one of them 0 with backend: dpdk).
func TestDPDKStatsMemif(t *testing.T) {
	bin := binary.Build(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "memif.sock")
	prof := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(prof, []byte(`name: stats-memif
backend: dpdk
dpdk:
  ports:
    - {name: net_memif0, ip: 10.96.0.1/24}
    - {name: net_memif1, ip: 10.96.0.2/24}
  impair: {seed: 7}
metaroce: {mtu: 1024}
bench:
  duration: 3s
  transports: [metaroce]
  sweep: {loss: [0.02]}
  plot: `+filepath.Join(dir, "b.png")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(binary.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "bench", prof, "--metrics-addr", addr, "--", "--lcores", "0@(0-1)", "--no-huge", "-m", "512",
		"--no-pci", "--file-prefix", dpdkPrefix(t, "stats"), "--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error",
		"--vdev", "net_memif0,role=server,id=0,socket="+sock, "--vdev", "net_memif1,role=client,id=0,socket="+sock)
	run.Dir = dir
	var out lockedBuffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = run.Wait(); close(done) }()
	// The last table read while the bench moved data: the counters only
	// grow, so the last one read is the fullest.
	var table string
poll:
	for {
		o, err := exec.Command(bin, "stats", addr).CombinedOutput()
		if err == nil && strings.Contains(string(o), "metaroce_conn_data_packets_total") {
			table = string(o)
		}
		select {
		case <-done:
			break poll
		case <-time.After(200 * time.Millisecond):
		}
	}
	if runErr != nil {
		t.Fatalf("bench: %v\n%s", runErr, out.String())
	}
	if table == "" {
		t.Fatalf("stats never read the running bench\n%s", out.String())
	}
	value := func(metric, labels string) float64 { return statValue(t, table, metric, labels) }
	tx, rx := value("metaroce_backend_tx_packets_total", "transport=metaroce"), value("metaroce_backend_rx_packets_total", "transport=metaroce")
	data := value("metaroce_conn_data_packets_total", "transport=metaroce")
	if tx == 0 || rx == 0 {
		t.Errorf("backend tx %v rx %v packets over dpdk", tx, rx)
	}
	// The client sends the data: its engine sent at least every data
	// packet the transport counted (frames include ARP and ACKs), some
	// of them appended to another's frame (dpdk.coalesce).
	coal := value("metaroce_conn_tx_coalesced_packets_total", "transport=metaroce")
	_ = value("metaroce_endpoint_rx_coalesced_datagrams_total", "transport=metaroce")
	if tx+coal < data {
		t.Errorf("backend sent %v frames and %v packets in others' frames, the transport %v data packets", tx, coal, data)
	}
	if value("metaroce_backend_tx_bytes_total", "transport=metaroce") < tx*64 {
		t.Errorf("tx bytes below 64 per frame")
	}
	if value("metaroce_backend_rx_dropped_total", "reason=injected") == 0 {
		t.Errorf("2%% injected loss, none counted\n%s", table)
	}
	_ = value("metaroce_backend_rx_dropped_total", "reason=other")
	// The shard's time split reaches Prometheus, every phase of it, and
	// adds up to the seconds the shard ran (stats prints whole seconds,
	// so only the sum is checked against the bench's run).
	loop := 0.0
	for _, phase := range []string{"rx", "core", "tx", "app", "idle"} {
		loop += value("metaroce_backend_loop_seconds_total", "phase="+phase)
	}
	if loop < 1 {
		t.Errorf("the shard's time split adds up to %v s over a bench of seconds\n%s", loop, table)
	}
	t.Logf("dpdk backend: %v frames sent, %v received, %v data packets, %v coalesced", tx, rx, data, coal)
}
