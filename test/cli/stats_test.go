package cli

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestStatsReadsRunningInstance: bench with --metrics-addr, and `metaroce
// stats` reading it while it runs.
func TestStatsReadsRunningInstance(t *testing.T) {
	bin := binary.Build(t)
	s, c := binary.LoopbackPair()
	addr := "127.0.0.1:" + strconv.Itoa(binary.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "bench", "--metrics-addr", addr, "--set", "bench.duration=3s",
		"--set", "bench.transports=metaroce", "--set", "bench.sweep.loss=0.01", "--set", "bench.plot="+t.TempDir()+"/b.png",
		"--set", "udp.server_ip="+s, "--set", "udp.client_ip="+c, "--set", "udp.port=0")
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = run.Wait(); close(done) }()
	var table string
	// Poll while the bench runs (its one point lasts 3 s after setup),
	// until path 7 has sent: the path rows exist from the connection's
	// start, before its first packets are spread (the first goes alone,
	// initial_inflight), so the first table read can be too early.
poll:
	for {
		o, err := exec.Command(bin, "stats", addr, "--paths").CombinedOutput()
		if err == nil && strings.Contains(string(o), "metaroce_path_tx_packets_total") {
			table = string(o)
			if pathSent(table, "path=7") {
				break
			}
		}
		select {
		case <-done:
			break poll
		case <-time.After(200 * time.Millisecond):
		}
	}
	<-done
	if err := runErr; err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	if table == "" {
		t.Fatal("stats never read the running bench")
	}
	value := func(metric, labels string) float64 { return statValue(t, table, metric, labels) }
	if value("metaroce_backend_tx_packets_total", "transport=metaroce") == 0 {
		t.Error("no packets counted")
	}
	if value("metaroce_path_tx_packets_total", "path=7") == 0 {
		t.Error("path 7 sent nothing")
	}
	// The injected loss (1% of what the client receives) is counted.
	_ = value("metaroce_backend_rx_dropped_total", "reason=injected")
	// The cores' own drop and recovery counters are there, by reason.
	for _, s := range []struct{ metric, labels string }{
		{"metaroce_endpoint_rx_dropped_total", "reason=unknown_conn"},
		{"metaroce_endpoint_rx_dropped_total", "reason=crc"},
		{"metaroce_conn_rx_dropped_total", "reason=duplicate"},
		{"metaroce_conn_rx_dropped_total", "reason=stale_generation"},
		{"metaroce_conn_tx_extra_packets_total", "reason=probe"},
		{"metaroce_conn_tx_extra_packets_total", "reason=moved"},
		{"metaroce_conn_rx_dropped_total", "reason=held_full"},
		// The sealed modes' refusals (zero here, mode none).
		{"metaroce_conn_rx_dropped_total", "reason=auth"},
		{"metaroce_conn_rx_dropped_total", "reason=replay"},
		{"metaroce_endpoint_rx_dropped_total", "reason=seal_mismatch"},
		{"metaroce_conn_spurious_timeouts_total", "transport=metaroce"},
		{"metaroce_conn_copies_cancelled_total", "transport=metaroce"},
		{"metaroce_conn_last_chunks_held_total", "transport=metaroce"},
		{"metaroce_conn_key_updates_total", "transport=metaroce"},
		// Admission control's refusals, RESETs and evictions.
		{"metaroce_endpoint_connects_refused_total", "reason=max_conns"},
		{"metaroce_endpoint_connects_refused_total", "reason=per_peer"},
		{"metaroce_endpoint_connects_refused_total", "reason=backlog"},
		{"metaroce_endpoint_connects_refused_total", "reason=not_accepting"},
		{"metaroce_endpoint_resets_total", "outcome=sent"},
		{"metaroce_endpoint_resets_total", "outcome=rate_limited"},
		{"metaroce_endpoint_conns_failed_total", "reason=half_open_evicted"},
		{"metaroce_endpoint_conns_failed_total", "reason=peer_restart"},
	} {
		_ = value(s.metric, s.labels)
	}
}

// pathSent reports whether the table counts packets sent on the path
// with labels.
func pathSent(table, labels string) bool {
	v, ok := statRow(table, "metaroce_path_tx_packets_total", labels)
	return ok && v > 0
}

// statValue is the value of metric in a `metaroce stats` table, on the
// first row whose labels contain labels; the test fails if there is none.
func statValue(t *testing.T, table, metric, labels string) float64 {
	t.Helper()
	v, ok := statRow(table, metric, labels)
	if !ok {
		t.Fatalf("no %s{%s} with a value in:\n%s", metric, labels, table)
	}
	return v
}

// statRow finds metric's first row whose labels contain labels, and its
// value (false: no such row, or no number in it).
func statRow(table, metric, labels string) (float64, bool) {
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == metric && strings.Contains(f[1], labels) {
			v, err := strconv.ParseFloat(f[2], 64)
			return v, err == nil
		}
	}
	return 0, false
}
