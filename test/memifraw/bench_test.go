//go:build dpdk

package memifraw

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/internal/corelat"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// benchMTU is the payload per packet: MR_BENCH_MTU or 1024 (the "1 KiB
// frames" of the issue).
var benchMTU = func() int {
	if v, err := strconv.Atoi(os.Getenv("MR_BENCH_MTU")); err == nil && v > 0 {
		return v
	}
	return 1024
}()

const (
	writeSize  = 64 << 10 // bytes per WRITE
	writeDepth = 128      // WRITEs kept outstanding
)

// wbw is a metaroce write_bw over memif pair 1: two engines, one shard
// each, A WRITEs into B.
type wbw struct {
	eng    [2]*dpdkengine.Engine
	sh     [2]*dpdkengine.Shard
	ep     [2]*metaroce.Endpoint
	qa     *metaroce.QueuePair
	cqa    *verbs.CompletionQueue
	src    *verbs.MemoryRegion
	dst    *verbs.MemoryRegion
	ca, cb *metaroce.Conn
	posted uint64
	done   uint64
}

var bw *wbw

func setupWriteBW(b *testing.B) *wbw {
	if bw != nil {
		return bw
	}
	w := &wbw{}
	ips := []string{"10.0.0.1", "10.0.0.2"}
	for i := 0; i < 2; i++ {
		cfg := dpdkengine.Config{Ports: []dpdkengine.PortConfig{{Name: []string{"net_memif2", "net_memif3"}[i], IP: ips[i]}},
			Neighbours: []dpdkengine.Neighbour{{Peer: uint32(1 - i), IP: ips[1-i]}},
			Checksum:   benchChecksum(), UDPChecksum: benchUDPChecksum(), PoolSize: 16383, ZeroCopyMin: benchZeroCopyMin()}
		e, err := dpdkengine.Start(cfg, nil)
		require.NoError(b, err)
		w.eng[i] = e
	}
	// Both stop polling, then the client side closes, and the server only
	// after the interrupt thread has handled the disconnect (memif races
	// otherwise; see dpdkengine.Engine.WaitLinkDown).
	atExit = append(atExit, func() {
		w.eng[0].Stop()
		w.eng[1].Stop()
		w.eng[1].Close()
		w.eng[0].WaitLinkDown(5 * time.Second)
		time.Sleep(50 * time.Millisecond)
		w.eng[0].Close()
	})
	for i := 0; i < 2; i++ {
		require.NoError(b, w.eng[i].WaitLink(10*time.Second))
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: benchMTU,
			AcceptIncoming: i == 1, ConnectRetries: 1000, Paths: benchPaths(), PathWindow: benchWindow()})
		require.NoError(b, err)
		w.ep[i] = ep
		w.sh[i], err = w.eng[i].Run(ep)
		require.NoError(b, err)
	}
	srcR, err := mempool.NewRegion(writeSize * writeDepth)
	require.NoError(b, err)
	dstR, err := mempool.NewRegion(writeSize * writeDepth)
	require.NoError(b, err)
	require.NoError(b, w.sh[0].Do(func(now verbs.Time) {
		w.ca, err = w.ep[0].Connect(now, 1)
	}))
	require.NoError(b, err)
	for deadline := time.Now().Add(10 * time.Second); w.cb == nil; time.Sleep(time.Millisecond) {
		require.True(b, time.Now().Before(deadline), "no connection")
		require.NoError(b, w.sh[1].Do(func(verbs.Time) {
			if c, ok := w.ep[1].Accept(); ok {
				w.cb = c
			}
		}))
	}
	require.NoError(b, w.sh[1].Do(func(verbs.Time) {
		pd := w.ep[1].AllocPD()
		cq := verbs.NewCompletionQueue(16)
		if _, err = w.cb.CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq}); err != nil {
			return
		}
		w.dst, err = pd.RegisterMR(dstR.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	}))
	require.NoError(b, err)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		est := false
		require.NoError(b, w.sh[0].Do(func(verbs.Time) { est = w.ca.Established() }))
		if est {
			break
		}
		require.True(b, time.Now().Before(deadline), "not established")
	}
	require.NoError(b, w.sh[0].Do(func(verbs.Time) {
		pd := w.ep[0].AllocPD()
		w.cqa = verbs.NewCompletionQueue(writeDepth)
		w.qa, err = w.ca.CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: w.cqa, RecvCQ: w.cqa})
		if err == nil {
			w.src, err = pd.RegisterMR(srcR.Bytes(), 0)
		}
	}))
	require.NoError(b, err)
	bw = w
	return w
}

// write moves n WRITEs of writeSize bytes, keeping writeDepth outstanding,
// and returns the time it took. The application goroutine tops the queue
// up through Shard.Do once per millisecond at most.
func (w *wbw) write(b *testing.B, n uint64) time.Duration {
	start := time.Now()
	target := w.done + n
	var wcs [writeDepth]verbs.WorkCompletion
	for w.done < target {
		require.NoError(b, w.sh[0].Do(func(now verbs.Time) {
			k := w.cqa.Poll(wcs[:])
			for _, wc := range wcs[:k] {
				if wc.Status != verbs.StatusSuccess {
					b.Errorf("WRITE %d: %v", wc.WRID, wc.Status)
				}
			}
			w.done += uint64(k)
			for w.posted-w.done < writeDepth && w.posted < target {
				slot := int(w.posted % writeDepth)
				if err := w.qa.PostSend(now, verbs.SendWR{ID: w.posted, Opcode: verbs.WRWrite,
					Local: w.src.SGE(slot*writeSize, writeSize), RemoteAddr: w.dst.Addr() + uint64(slot*writeSize), RKey: w.dst.RKey()}); err != nil {
					b.Errorf("post: %v", err)
					return
				}
				w.posted++
			}
		}))
		if b.Failed() {
			b.FailNow()
		}
		time.Sleep(200 * time.Microsecond)
	}
	return time.Since(start)
}

// BenchmarkWriteBWVsRaw: one op is 64 KiB moved, by the raw memif
// sender/receiver in frames as long as the transport's data frames, and
// as metaroce WRITEs through two engine shards, in the same process. The
// two alternate for benchRounds rounds of b.N/rounds ops each, and the
// benchmark reports the median of each side's rounds and the ratio of the
// medians, beside the packets per second the sending shard handled (data
// out + ACKs in) and, with -v, every round and where each shard's loop
// went.
func BenchmarkWriteBWVsRaw(b *testing.B) {
	pool, ports := rawPair(b)
	w := setupWriteBW(b)
	frameLen := dpdkengine.HdrLen + w.ep[0].MaxPacketLen() // a full data frame
	payloadPerFrame := benchMTU
	rounds := benchRounds()
	per := max(uint64(b.N)/uint64(rounds), 1)
	var rawGbps, writeGbps []float64
	var sendSplit, recvSplit dpdkengine.TimeSplit
	var shardFrames uint64
	var writeTime time.Duration
	var nearRaw, nearWrite []float64
	b.ResetTimer()
	// A round's first measurement is the last one of the round before:
	// nothing runs between them.
	next := hop()
	for r := 0; r < rounds; r++ {
		cl0 := next
		raw, err := Run(pool, ports[0], ports[1], frameLen, per*writeSize/uint64(payloadPerFrame), 32)
		require.NoError(b, err)
		cl1 := hop()
		a0, err := w.sh[0].Counters()
		require.NoError(b, err)
		r0, err := w.sh[1].Counters()
		require.NoError(b, err)
		el := w.write(b, per)
		a1, err := w.sh[0].Counters()
		require.NoError(b, err)
		r1, err := w.sh[1].Counters()
		require.NoError(b, err)
		for i := range sendSplit {
			sendSplit[i] += a1.Time[i] - a0.Time[i]
			recvSplit[i] += r1.Time[i] - r0.Time[i]
		}
		shardFrames += a1.TxFrames - a0.TxFrames + a1.RxFrames - a0.RxFrames
		writeTime += el
		rg := raw.Mpps() * 1e6 * float64(payloadPerFrame) * 8 / 1e9
		wg := float64(per) * writeSize * 8 / el.Seconds() / 1e9
		cl2 := hop()
		next = cl2
		rawGbps, writeGbps = append(rawGbps, rg), append(writeGbps, wg)
		near := cl0 > 0 && cl1 > 0 && cl2 > 0 && max(cl0, cl1, cl2) < nearHop
		if near {
			nearRaw, nearWrite = append(nearRaw, rg), append(nearWrite, wg)
		}
		if testing.Verbose() {
			b.Logf("round %d: raw %.2f Mpps (%.1f Gb/s payload), write_bw %.1f Gb/s, ratio %.2f; core-to-core %v / %v / %v (near %v); shard A: loops %d idle sleeps %d rx %d tx %d blocked %d",
				r+1, raw.Mpps(), rg, wg, wg/rg, cl0, cl1, cl2, near, a1.Loops-a0.Loops, a1.IdleSleeps-a0.IdleSleeps,
				a1.RxFrames-a0.RxFrames, a1.TxFrames-a0.TxFrames, a1.TxBlocked-a0.TxBlocked)
		}
	}
	b.StopTimer()
	rawMed, writeMed := median(rawGbps), median(writeGbps)
	if testing.Verbose() {
		b.Logf("time split (rx / core / tx / app / idle), all rounds: sender %s; receiver %s", splitShares(&sendSplit), splitShares(&recvSplit))
	}
	b.ReportMetric(rawMed*1e9/8/float64(payloadPerFrame)/1e6, "raw_Mpps")
	b.ReportMetric(rawMed, "raw_payload_Gbps")
	b.ReportMetric(writeMed, "write_Gbps")
	b.ReportMetric(writeMed*1e9/8/float64(payloadPerFrame)/1e6, "write_data_Mpps")
	b.ReportMetric(float64(shardFrames)/writeTime.Seconds()/1e6, "shardA_Mpps")
	b.ReportMetric(writeMed/rawMed, "ratio")
	b.ReportMetric(float64(len(nearRaw)), "near_rounds")
	if len(nearRaw) > 0 {
		// The same ratio over the rounds whose CPUs shared a cache
		// before, between and after the two runs.
		b.ReportMetric(median(nearWrite)/median(nearRaw), "ratio_near")
	}
	b.Logf("frame %d B, hugepages=%v, checksum=%s, udp_checksum=%s, %d rounds of %d ops, medians: raw %.1f Gb/s payload (rounds %.1f to %.1f), write_bw %.1f Gb/s (%.1f to %.1f), ratio %.2f",
		frameLen, hugepages, benchChecksum(), benchUDPChecksum(), rounds, per, rawMed, slices.Min(rawGbps), slices.Max(rawGbps),
		writeMed, slices.Min(writeGbps), slices.Max(writeGbps), writeMed/rawMed)
}

// nearHop is the one-way cache-line latency under which CPUs 0 and 1 are
// taken to share a cache: about 30 to 45 ns when they do on this VM, 160
// to 200 ns when they do not (internal/corelat).
const nearHop = 100 * time.Nanosecond

// hop is the cache-line latency between CPUs 0 and 1 now (0 when it
// cannot be measured: fewer CPUs, or a peer that never ran). Both raw
// threads and both shards' threads move data between two CPUs, and the
// raw pair's rate follows this latency more than anything it does.
func hop() time.Duration {
	var best time.Duration
	for range 3 {
		d, err := corelat.Measure(0, 1, 5000, 2*time.Second)
		if err != nil {
			return 0
		}
		if best == 0 || d < best {
			best = d
		}
	}
	return best
}

// benchRounds is how many times the benchmark alternates the raw pair and
// metaroce: MR_BENCH_ROUNDS or 5. On these shared cores the raw pair's
// rate swings several-fold from one run to the next (1.4 to 9 Mpps of
// 1136-byte frames in seven runs on 2026-12-03) while metaroce's moves by
// a third, so the ratio of a single pair of runs says little; the ratio
// of medians of alternated rounds is steadier.
func benchRounds() int {
	if v, err := strconv.Atoi(os.Getenv("MR_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 5
}

// median is the middle of xs (the mean of the two middle values for an
// even count); xs is sorted in place and must not be empty.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// benchChecksum is the engines' checksum mode: MR_BENCH_CHECKSUM or
// "auto" (memif offers no offload, so auto means software UDP checksums).
func benchChecksum() string {
	if v := os.Getenv("MR_BENCH_CHECKSUM"); v != "" {
		return v
	}
	return "auto"
}

// benchUDPChecksum is the engines' udp_checksum: MR_BENCH_UDP_CHECKSUM or
// "zero", metaroce's default in the CLI (its CRC32C covers the packets).
// "compute" measures the software UDP checksum memif leaves to the CPU.
func benchUDPChecksum() string {
	if v := os.Getenv("MR_BENCH_UDP_CHECKSUM"); v != "" {
		return v
	}
	return "zero"
}

// benchZeroCopyMin is the engines' zero_copy_min: MR_BENCH_ZERO_COPY_MIN
// or 0 (off, the CLI's default). The source region is DPDK memory
// (mempool.NewRegion after the EAL started), so it can be lent.
func benchZeroCopyMin() int {
	if v, err := strconv.Atoi(os.Getenv("MR_BENCH_ZERO_COPY_MIN")); err == nil && v >= 0 {
		return v
	}
	return 0
}

// benchPaths is the paths per connection: MR_BENCH_PATHS or 8 (the core's
// default). Each path may have 64 packets in flight.
func benchPaths() int {
	if v, err := strconv.Atoi(os.Getenv("MR_BENCH_PATHS")); err == nil && v > 0 {
		return v
	}
	return 8
}

// benchWindow is the packets each path may have in flight:
// MR_BENCH_WINDOW or 64 (the core's default).
func benchWindow() int {
	if v, err := strconv.Atoi(os.Getenv("MR_BENCH_WINDOW")); err == nil && v > 0 {
		return v
	}
	return 64
}

// splitShares formats a loop's time split as the share of each phase.
func splitShares(t *dpdkengine.TimeSplit) string {
	tot := t.Total()
	if tot <= 0 {
		return "-"
	}
	var b strings.Builder
	for i, d := range t {
		if i > 0 {
			b.WriteString(" / ")
		}
		fmt.Fprintf(&b, "%.0f%%", 100*float64(d)/float64(tot))
	}
	return b.String()
}
