package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/profile"
)

// perfResult is one row of a perf table: one message size.
type perfResult struct {
	Size    int       `json:"size"`
	Iters   int       `json:"iters"`
	Seconds float64   `json:"seconds"`
	BWPeak  float64   `json:"bw_peak_bytes_per_second"`
	BWAvg   float64   `json:"bw_average_bytes_per_second"`
	MsgRate float64   `json:"msg_rate_per_second"`
	Lat     *latStats `json:"lat,omitempty"`
	Partial bool      `json:"partial,omitempty"`
}

// latStats are in microseconds.
type latStats struct {
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

// plus adds the other direction of a bidirectional run: perftest -b
// reports the sum of both directions' bandwidth and message rate; the
// iterations column stays one side's.
func (a perfResult) plus(b perfResult) perfResult {
	a.BWPeak += b.BWPeak
	a.BWAvg += b.BWAvg
	a.MsgRate += b.MsgRate
	a.Partial = a.Partial || b.Partial
	return a
}

// perftest's table strings, verbatim (perftest_parameters.h).
const (
	resultLine    = "---------------------------------------------------------------------------------------"
	resultFmt     = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG    = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLat  = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	reportFmt     = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f"
	reportFmtLat  = " %-7d %-10d       %-7.2f        %-7.2f      %-7.2f"
	reportFmtLatX = "     \t%-7.2f     \t%-7.2f\t\t%-7.2f\t\t%-7.2f"
)

// testTitle is perftest's title line for each test.
var testTitle = map[string]string{
	"write_bw": "RDMA_Write BW Test", "send_bw": "Send BW Test", "read_bw": "RDMA_Read BW Test",
	"write_lat": "RDMA_Write Latency Test", "send_lat": "Send Latency Test", "read_lat": "RDMA_Read Latency Test",
}

// bwUnit converts bytes/s to perftest's units: MB/sec is 2^20 bytes per
// second, Gb/sec is 10^9 bits per second (--report_gbits).
func bwUnit(bps float64, gbits bool) float64 {
	if gbits {
		return bps * 8 / 1e9
	}
	return bps / (1 << 20)
}

// printHeader prints perftest's banner for the test.
func printHeader(w io.Writer, p perfParams, cfg profile.Config, gbits bool, local, remote string) {
	k := transportKinds[p.Transport]
	mtu := k.MTU(cfg)
	paths := p.Paths
	if paths == 0 {
		paths = cfg.Metaroce.Paths
	}
	if k.OnePath {
		paths = 1
	}
	fmt.Fprintln(w, resultLine)
	fmt.Fprintf(w, "                    %s\n", testTitle[p.Test])
	fmt.Fprintf(w, " Transport       : %-12s Backend        : %s\n", p.Transport, cfg.Backend)
	fmt.Fprintf(w, " Number of qps   : %-12d Paths per conn : %d\n", p.QPs, paths)
	fmt.Fprintf(w, " Connection type : RC           Bidirectional  : %v\n", onOff(p.Bidir))
	fmt.Fprintf(w, " TX depth        : %d\n", p.TxDepth)
	fmt.Fprintf(w, " Mtu             : %d[B]\n", mtu)
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	fmt.Fprintf(w, " Data ex. method : TCP (setup) / UDP (data)\n")
	fmt.Fprintln(w, resultLine)
	if local != "" {
		fmt.Fprintf(w, " local address: %s\n", local)
		fmt.Fprintf(w, " remote address: %s\n", remote)
		fmt.Fprintln(w, resultLine)
	}
	switch {
	case p.isLat():
		fmt.Fprintln(w, resultFmtLat)
	case gbits:
		fmt.Fprintln(w, resultFmtG)
	default:
		fmt.Fprintln(w, resultFmt)
	}
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// printRow prints one result line in perftest's format.
func printRow(w io.Writer, p perfParams, r perfResult, gbits bool) {
	if p.isLat() {
		if r.Lat == nil {
			fmt.Fprintf(w, " %-7d %-10d       (no samples)\n", r.Size, r.Iters)
			return
		}
		l := r.Lat
		fmt.Fprintf(w, reportFmtLat+reportFmtLatX+"\n", r.Size, r.Iters, l.Min, l.Max, l.Typical, l.Avg, l.Stdev, l.P99, l.P999)
	} else {
		fmt.Fprintf(w, reportFmt+"\n", r.Size, r.Iters, bwUnit(r.BWPeak, gbits), bwUnit(r.BWAvg, gbits), r.MsgRate/1e6)
	}
	if r.Partial {
		fmt.Fprintln(w, " (interrupted: partial result)")
	}
}

// writeJSON writes perftest's JSON (--out_json): test_info and results
// with perftest's keys (BW in the table's unit). With several sizes (-a)
// "results" is a list of those objects.
func writeJSON(file string, p perfParams, cfg profile.Config, rs []perfResult, gbits bool) error {
	info := map[string]any{
		"test": strings.ReplaceAll(testTitle[p.Test], " ", "_"), "Number_of_qps": p.QPs,
		"Transport_type": string(p.Transport), "Connection_type": "RC", "TX_depth": p.TxDepth,
		"Link_type": "Ethernet", "Backend": string(cfg.Backend), "Data_ex_method": "Ethernet",
	}
	var results []map[string]any
	for _, r := range rs {
		m := map[string]any{"MsgSize": r.Size, "n_iterations": r.Iters}
		if p.isLat() && r.Lat != nil {
			l := r.Lat
			m["t_min"], m["t_max"], m["t_typical"], m["t_avg"], m["t_stdev"] = l.Min, l.Max, l.Typical, l.Avg, l.Stdev
			m["percentile_99"], m["percentile_99.9"] = l.P99, l.P999
		} else if !p.isLat() {
			m["BW_peak"], m["BW_average"], m["MsgRate"] = bwUnit(r.BWPeak, gbits), bwUnit(r.BWAvg, gbits), r.MsgRate/1e6
		}
		if r.Partial {
			m["partial"] = true
		}
		results = append(results, m)
	}
	doc := map[string]any{"test_info": info}
	if len(results) == 1 {
		doc["results"] = results[0]
	} else {
		doc["results"] = results
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// progress prints a line on stderr every second once a run has lasted
// two seconds (and never when disabled).
type progress struct {
	w       io.Writer
	enabled bool
	start   time.Time
	last    time.Time
}

func newProgress(w io.Writer, enabled bool) *progress {
	now := time.Now()
	return &progress{w: w, enabled: enabled, start: now, last: now}
}

func (p *progress) tick(test string, r runner) {
	if p == nil || !p.enabled {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < 2*time.Second || now.Sub(p.last) < time.Second {
		return
	}
	p.last = now
	res := r.result()
	if res.Lat != nil {
		fmt.Fprintf(p.w, "  %s %d B: %.0fs, %d samples, t_typical %.2f us\n", test, res.Size, now.Sub(p.start).Seconds(), res.Iters, res.Lat.Typical)
		return
	}
	fmt.Fprintf(p.w, "  %s %d B: %.0fs, %d messages, %.2f Gb/s\n", test, res.Size, now.Sub(p.start).Seconds(), res.Iters, res.BWAvg*8/1e9)
}

// logLoop logs where the backend's loop spent its time and how often it
// called into its driver, for backends that measure it (dpdk): the split
// of a shard's time (rx, core, tx, app, idle) and the driver calls per
// packet (sent and received), which together say whether the loop was
// busy, waiting or paying for its polling. The process's cgo calls per
// packet (runtime.NumCgoCall, setup and telemetry included) is the same
// figure counted from outside the loop.
func logLoop(log *zap.Logger, st engine.Stats) {
	if !st.Loop.Measured {
		return
	}
	l := st.Loop
	total := (l.Rx + l.Core + l.Tx + l.App + l.Idle).Seconds()
	if total <= 0 {
		return
	}
	pct := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*d.Seconds()/total) }
	pkts := st.TxPackets + st.RxPackets
	perPkt := 0.0
	if pkts > 0 {
		perPkt = float64(st.DriverCalls) / float64(pkts)
	}
	log.Sugar().Infow("backend loop", "seconds", fmt.Sprintf("%.3f", total),
		"rx", pct(l.Rx), "core", pct(l.Core), "tx", pct(l.Tx), "app", pct(l.App), "idle", pct(l.Idle),
		"packets", pkts, "driver_calls", st.DriverCalls, "driver_calls_per_packet", fmt.Sprintf("%.3f", perPkt),
		"rx_polls", st.RxPolls, "process_cgo_calls_per_packet", fmt.Sprintf("%.3f", float64(runtime.NumCgoCall())/float64(max(pkts, 1))))
	if st.ZeroCopy {
		log.Sugar().Infow("zero-copy tx", "sent", st.ZeroCopySent, "fallback_not_dpdk_memory", st.ZeroCopyFallbackMemory,
			"fallback_no_slot", st.ZeroCopyFallbackSlots, "fallback_no_mbuf", st.ZeroCopyFallbackNoMbuf)
	}
}
