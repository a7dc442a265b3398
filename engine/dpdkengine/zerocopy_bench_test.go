//go:build dpdk

package dpdkengine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// zcBenchPair is the memif pair BenchmarkZeroCopyTX drives. The test EAL
// has no spare pair (RTE_MAX_ETHPORTS), so it borrows one a test uses and
// closes: run the benchmark alone (-run '^$'); after that test it skips.
const zcBenchPair = 0

// BenchmarkZeroCopyTX sends the same stream both ways over a real memif
// pair, with the payload copied into the mbuf (copy) and attached from
// the region (zerocopy): A's application, on A's shard, keeps 64
// one-packet WRITEs of size bytes outstanding to B. ns/op is per packet
// (a WRITE of one data packet, its ACK traffic included); the crossover
// size is where zerocopy gets cheaper, which is what DefaultZeroCopyMin
// is set from; calls/pkt is cgo calls per packet on A. Both shards share
// the machine's cores with everything else: compare the two modes of one
// size within one run. The pair's memif buffers hold 9 KiB (TestMain), so
// every frame is one memif descriptor.
func BenchmarkZeroCopyTX(b *testing.B) {
	var eng [2]*Engine
	for i := 0; i < 2; i++ {
		cfg := Config{
			Ports:       []PortConfig{{Name: fmt.Sprintf("net_memif%d", 2*zcBenchPair+i), IP: ips[i]}},
			PoolSize:    4095,
			DataRoom:    9216 + 128,
			UDPChecksum: "zero",
			ZeroCopyMin: 1, // ports set up for chained mbufs
		}
		if i == 0 {
			cfg.Neighbours = []Neighbour{{Peer: 1, IP: ips[1]}}
		}
		e, err := Start(cfg, nil)
		if err != nil {
			b.Skipf("memif pair %d unavailable (run the benchmark alone: -run '^$'): %v", zcBenchPair, err)
		}
		eng[i] = e
	}
	defer func() {
		for _, e := range eng {
			e.Stop()
		}
		_ = eng[1].Close()
		_ = eng[0].WaitLinkDown(5 * time.Second)
		time.Sleep(50 * time.Millisecond)
		_ = eng[0].Close()
	}()
	for _, e := range eng {
		if err := e.WaitLink(10 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
	const window, span = 64, 8 << 20
	var regs []*mempool.Region
	defer func() {
		for _, r := range regs {
			_ = r.Free()
		}
	}()
	for range 2 {
		r, err := mempool.NewRegion(span)
		if err != nil {
			b.Fatal(err)
		}
		regs = append(regs, r)
	}
	for _, size := range []int{64, 256, 512, 1024, 2048, 4096, 8192} {
		for _, mode := range []string{"copy", "zerocopy"} {
			b.Run(fmt.Sprintf("%dB/%s", size, mode), func(b *testing.B) {
				min := 0
				if mode == "zerocopy" {
					min = 1
				}
				for _, e := range eng {
					if err := e.SetZeroCopyMin(min); err != nil {
						b.Fatal(err)
					}
				}
				benchZeroCopy(b, eng, regs, size, window, span, mode == "zerocopy")
			})
		}
	}
}

func benchZeroCopy(b *testing.B, eng [2]*Engine, regs []*mempool.Region, size, window, span int, zc bool) {
	var be [2]*Backend
	var ep [2]*metaroce.Endpoint
	for i := 0; i < 2; i++ {
		e, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: max(size, metaroce.MinMTU),
			AcceptIncoming: i == 1, ConnectRetries: 1000})
		if err != nil {
			b.Fatal(err)
		}
		ep[i], be[i] = e, eng[i].Backend()
		if err := be[i].Attach(e); err != nil {
			b.Fatal(err)
		}
		defer be[i].Close()
	}
	if be[0].sh.ZeroCopy() != zc {
		b.Fatalf("zero-copy %v, want %v", be[0].sh.ZeroCopy(), zc)
	}
	pb := ep[1].AllocPD()
	md, err := pb.RegisterMR(regs[1].Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	cqb := verbs.NewCompletionQueue(16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bErr := make(chan error, 1)
	go func() {
		var cb *metaroce.Conn
		qp := false
		bErr <- be[1].Run(ctx, engine.AppFunc(func(verbs.Time) (bool, error) {
			if cb == nil {
				cb, _ = ep[1].Accept()
			}
			if cb != nil && cb.Established() && !qp {
				if _, err := cb.CreateQP(1, verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
					return false, err
				}
				qp = true
			}
			return false, nil
		}))
	}()
	pa := ep[0].AllocPD()
	ms, err := pa.RegisterMR(regs[0].Bytes(), 0)
	if err != nil {
		b.Fatal(err)
	}
	cqa := verbs.NewCompletionQueue(2 * window)
	ca, err := ep[0].Connect(be[0].Now(), 1)
	if err != nil {
		b.Fatal(err)
	}
	var qa *metaroce.QueuePair
	deadline := time.Now().Add(10 * time.Second)
	if err := be[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) {
		if time.Now().After(deadline) {
			return false, fmt.Errorf("no connection")
		}
		if !ca.Established() {
			return false, nil
		}
		q, err := ca.CreateQP(1, verbs.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa})
		qa = q
		return err == nil, err
	})); err != nil {
		b.Fatal(err)
	}
	slots := span / size
	wcs := make([]verbs.WorkCompletion, window)
	posted, done := 0, 0

	step := func(now verbs.Time) (bool, error) {
		n := cqa.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.StatusSuccess {
				return false, fmt.Errorf("wr %d: %v (B's drops: %v)", wc.WRID, wc.Status, be[1].sh.c.DropMap())
			}
		}
		done += n
		for posted-done < window && posted < b.N {
			off := (posted % slots) * size
			if err := qa.PostSend(now, verbs.SendWR{ID: uint64(posted), Opcode: verbs.WRWrite, Local: ms.SGE(off, size),
				RemoteAddr: md.Addr() + uint64(off), RKey: md.RKey()}); err != nil {
				return false, err
			}
			posted++
		}
		return done >= b.N, nil
	}
	c0 := be[0].sh.c
	b.ResetTimer()
	if err := be[0].Run(context.Background(), engine.AppFunc(step)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	c1 := be[0].sh.c
	if zc {
		if got := c1.ZeroCopySent - c0.ZeroCopySent; got < uint64(b.N) {
			b.Fatalf("%d packets sent by reference, want >= %d", got, b.N)
		}
	}
	b.ReportMetric(float64(c1.DriverCalls-c0.DriverCalls)/float64(b.N), "calls/pkt")
	b.SetBytes(int64(size))
	cancel()
	<-bErr
}
