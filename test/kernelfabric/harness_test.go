package kernelfabric

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// end is one endpoint of the fabric, whatever backend runs it: its
// transport, a way to run code on the backend's goroutine, and the
// backend's counters (the kernel's socket-buffer or af_packet ring drops
// among them).
type end struct {
	ep    *metaroce.Endpoint
	do    func(fn func(now verbs.Time)) error
	stats func() engine.Stats
	peer  verbs.PeerHandle // the other end, as this end's backend names it
}

// fabric runs transfers between host A (h[0]) and host B (h[1]).
type fabric struct {
	t      *testing.T
	name   string // the backend, for the log
	topo   Topology
	h      [2]end
	ca, cb *metaroce.Conn
	// alloc returns memory the backend can place into (DPDK: a region).
	alloc func(n int) []byte
}

func (f *fabric) await(i int, what string, limit time.Duration, cond func(now verbs.Time) bool) {
	deadline := time.Now().Add(limit)
	for {
		ok := false
		require.NoError(f.t, f.h[i].do(func(now verbs.Time) { ok = cond(now) }))
		if ok {
			return
		}
		if !time.Now().Before(deadline) {
			f.dump()
			f.t.Fatalf("%s: not done after %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// dump logs both connections' path states (why a transfer is stuck).
func (f *fabric) dump() {
	for i, c := range [2]*metaroce.Conn{f.ca, f.cb} {
		if c == nil {
			continue
		}
		_ = f.h[i].do(func(verbs.Time) {
			f.t.Logf("host %c: state %s inflight %d counters %+v", 'A'+i, c.State(), c.Inflight(), *c.Counters())
			for p := range c.NumPaths() {
				pc := c.PathCounters(verbs.PathID(p))
				f.t.Logf("  path %d failed %v window %d srtt %v: failures %d restores %d moved %d probes %d sack %d to %d spurious %d tx %d",
					p, c.PathFailed(verbs.PathID(p)), c.PathWindow(verbs.PathID(p)), c.PathSRTT(verbs.PathID(p)),
					pc.Failures, pc.Restores, pc.MovedAway, pc.Probes, pc.RetransmitSACK, pc.RetransmitTimeout, pc.SpuriousTimeouts, pc.TxPackets)
			}
		})
	}
}

func (f *fabric) connect() {
	require.NoError(f.t, f.h[0].do(func(now verbs.Time) {
		var err error
		f.ca, err = f.h[0].ep.Connect(now, f.h[0].peer)
		require.NoError(f.t, err)
	}))
	f.await(1, "accept", 20*time.Second, func(verbs.Time) bool {
		if c, ok := f.h[1].ep.Accept(); ok {
			f.cb = c
		}
		return f.cb != nil
	})
	f.await(0, "established", 20*time.Second, func(verbs.Time) bool { return f.ca.Established() })
}

// snap is what both ends counted at one moment.
type snap struct {
	conn [2]metaroce.ConnCounters
	be   [2]engine.Stats
}

func (f *fabric) snap() snap {
	var s snap
	for i, c := range [2]*metaroce.Conn{f.ca, f.cb} {
		require.NoError(f.t, f.h[i].do(func(verbs.Time) { s.conn[i] = *c.Counters() }))
		s.be[i] = f.h[i].stats()
	}
	return s
}

// delta is what happened between two snaps.
type delta struct {
	sent, resent [2]uint64 // data packets, first sends and resends, by end
	placed       [2]uint64 // payload bytes placed, by end
	kernelDrops  [2]uint64 // socket-buffer or af_packet ring drops, by receiving end
	failures     uint64
	spurious     uint64
	conn         [2]metaroce.ConnCounters // the later snap
}

func (a snap) to(b snap) delta {
	var d delta
	for i := range 2 {
		d.sent[i] = b.conn[i].DataPacketsSent - a.conn[i].DataPacketsSent
		d.resent[i] = b.conn[i].DataResent - a.conn[i].DataResent
		d.placed[i] = b.conn[i].PayloadPlaced - a.conn[i].PayloadPlaced
		d.kernelDrops[i] = b.be[i].RxKernelDrops - a.be[i].RxKernelDrops
		d.failures += b.conn[i].PathFailures - a.conn[i].PathFailures
		d.spurious += b.conn[i].SpuriousTimeouts - a.conn[i].SpuriousTimeouts
	}
	d.conn = b.conn
	return d
}

// load is one transfer: A WRITEs w bytes and SENDs s bytes (4 messages) to
// B, then READs r bytes from B (r may be 0), on a new stream.
type load struct{ w, s, r int }

// transfer runs l on stream; every work request must succeed and every
// byte must match. during, when not nil, runs (on the test goroutine)
// once the work requests are posted, while they are in flight.
func (f *fabric) transfer(stream metaroce.StreamID, l load, during func()) {
	t := f.t
	w, s, r := l.w, l.s, l.r
	rng := rand.New(rand.NewPCG(uint64(stream), 9))
	srcA, dstB := f.alloc(w+s), f.alloc(w+s)
	var srcB, dstA []byte
	if r > 0 {
		srcB, dstA = f.alloc(r), f.alloc(r)
	}
	for i := range srcA {
		srcA[i] = byte(rng.Uint32())
	}
	for i := range srcB {
		srcB[i] = byte(rng.Uint32())
	}
	const msgs = 4
	var qa, qb *metaroce.QueuePair
	cqa, cqb := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	var mSrcB, mDstB *verbs.MemoryRegion
	require.NoError(t, f.h[1].do(func(now verbs.Time) {
		pd := f.h[1].ep.AllocPD()
		var err error
		qb, err = f.cb.CreateQP(stream, verbs.QPAttr{PD: pd, SendCQ: cqb, RecvCQ: cqb})
		require.NoError(t, err)
		if r > 0 {
			mSrcB, err = pd.RegisterMR(srcB, verbs.AccessRemoteRead)
			require.NoError(t, err)
		}
		mDstB, err = pd.RegisterMR(dstB, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		for i := 0; i < msgs; i++ {
			require.NoError(t, qb.PostRecv(now, verbs.RecvWR{ID: uint64(i), Local: mDstB.SGE(w+i*s/msgs, s/msgs)}))
		}
	}))
	wrs := msgs + 1
	require.NoError(t, f.h[0].do(func(now verbs.Time) {
		pd := f.h[0].ep.AllocPD()
		var err error
		qa, err = f.ca.CreateQP(stream, verbs.QPAttr{PD: pd, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		mSrcA, err := pd.RegisterMR(srcA, 0)
		require.NoError(t, err)
		require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: mSrcA.SGE(0, w),
			RemoteAddr: mDstB.Addr(), RKey: mDstB.RKey()}))
		for i := 0; i < msgs; i++ {
			require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 10 + uint64(i), Opcode: verbs.WRSend, Local: mSrcA.SGE(w+i*s/msgs, s/msgs)}))
		}
		if r > 0 {
			mDstA, err := pd.RegisterMR(dstA, verbs.AccessLocalWrite)
			require.NoError(t, err)
			require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 2, Opcode: verbs.WRRead, Local: mDstA.SGE(0, r),
				RemoteAddr: mSrcB.Addr(), RKey: mSrcB.RKey()}))
			wrs++
		}
	}))
	if during != nil {
		during()
	}
	var wcs [16]verbs.WorkCompletion
	gotA, gotB := 0, 0
	f.await(0, fmt.Sprintf("stream %d sender completions", stream), 30*time.Second, func(verbs.Time) bool {
		n := cqa.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status, "stream %d wr %d", stream, wc.WRID)
		}
		gotA += n
		return gotA == wrs
	})
	f.await(1, fmt.Sprintf("stream %d receiver completions", stream), 10*time.Second, func(verbs.Time) bool {
		n := cqb.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
		}
		gotB += n
		return gotB == msgs
	})
	require.Equal(t, srcA, dstB, "WRITE/SEND bytes")
	require.Equal(t, srcB, dstA, "READ bytes")
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, f.h[0].do(func(verbs.Time) { require.Zero(t, cqa.Len(), "extra completions at A") }))
	require.NoError(t, f.h[1].do(func(verbs.Time) { require.Zero(t, cqb.Len(), "extra completions at B") }))
}

// run is the kernel-fabric test, the same for every backend. Every
// figure about the network is read from the network (nftables' own drop
// counters on each spine, the spines' interface counters) or from the
// kernel (socket-buffer or af_packet ring drops, which are losses too),
// never from the transport itself.
func (f *fabric) run() {
	t := f.t
	topo := f.topo
	f.connect()

	// 1. Spraying spreads one connection over all four spines.
	before, err := topo.SpineRx()
	require.NoError(t, err)
	f.transfer(1, load{2 << 20, 256 << 10, 512 << 10}, nil)
	after, err := topo.SpineRx()
	require.NoError(t, err)
	var total uint64
	var per [Spines]uint64
	for i := range per {
		per[i] = after[i] - before[i]
		total += per[i]
	}
	t.Logf("%s spraying: packets from leafA per spine %v (total %d)", f.name, per, total)
	for i, n := range per {
		// 64 paths hashed onto 4 spines: a spine gets ~16 of them; below
		// 2 would be a ~1e-5 chance for a working spray.
		require.Greater(t, n, total/32, "spine r%d carried too little of the connection: %v", i+1, per)
	}

	// 2. No loss on the wire: fewer than 0.1% of the data packets resent,
	// beyond what the kernel itself dropped.
	s0 := f.snap()
	f.transfer(2, load{24 << 20, 1 << 20, 4 << 20}, nil)
	d := s0.to(f.snap())
	sent, resent := d.sent[0]+d.sent[1], d.resent[0]+d.resent[1]
	kdrops := d.kernelDrops[0] + d.kernelDrops[1]
	t.Logf("%s 0%% loss: %d data packets sent, %d resent (%.4f%%), kernel drops (socket/ring) %d, path failures %d, timeouts proven spurious %d",
		f.name, sent, resent, 100*float64(resent)/float64(sent), kdrops, d.failures, d.spurious)
	require.Greater(t, sent, uint64(20000), "a transfer large enough to measure 0.1%%")
	require.Less(t, float64(resent), 0.001*float64(sent)+1.05*float64(kdrops),
		"resent %d of %d data packets on a lossless fabric (kernel drops %d)", resent, sent, kdrops)

	// 3. 1% loss on every spine, both directions: every packet resent
	// answers a packet the wire (or the kernel) lost. A WRITE/SEND load:
	// the data packets go A to B only, so what nftables dropped from A
	// and B's kernel drops bound what A had to resend.
	require.NoError(t, topo.AddSpineLoss(10))
	s0 = f.snap()
	f.transfer(3, load{16 << 20, 1 << 20, 0}, nil)
	d = s0.to(f.snap())
	drops, err := topo.SpineDrops()
	require.NoError(t, err)
	var ab, ba uint64
	for _, x := range drops {
		ab += x.AB
		ba += x.BA
	}
	lost := ab + d.kernelDrops[1]
	ratio := float64(d.resent[0]) / float64(lost)
	t.Logf("%s 1%% loss on every spine: nftables dropped A->B %d, B->A %d, per spine %v; B's kernel drops %d; A sent %d data packets, resent %d: resent/lost %.3f; path failures %d",
		f.name, ab, ba, drops, d.kernelDrops[1], d.sent[0], d.resent[0], ratio, d.failures)
	for i, x := range drops {
		// ~17,000 data packets, a spine carries a few thousand of them:
		// fewer than 10 drops on one is a broken loss rule, not chance.
		require.GreaterOrEqual(t, x.AB, uint64(10), "spine r%d dropped too little to measure: %v", i+1, drops)
	}
	require.LessOrEqual(t, ratio, 1.05, "resent %d for %d lost", d.resent[0], lost)
	// The READ at 1% loss: every byte verified (its responses cross the
	// spines' B->A loss).
	f.transfer(4, load{256 << 10, 256 << 10, 4 << 20}, nil)
	require.NoError(t, topo.RemoveSpineLoss())

	// 4. One spine's link down mid-run: every work request completes and
	// each byte is placed exactly once (PayloadPlaced counts each byte
	// placed: a copy of a chunk placed again after its message completed
	// would overwrite a reused buffer, and count twice).
	s0 = f.snap()
	before, err = topo.SpineRx()
	require.NoError(t, err)
	ld := load{8 << 20, 1 << 20, 2 << 20}
	f.transfer(5, ld, func() {
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, topo.SpineLinkDown(2))
	})
	d = s0.to(f.snap())
	after, err = topo.SpineRx()
	require.NoError(t, err)
	for i := range per {
		per[i] = after[i] - before[i]
	}
	routes, err := topo.InNS("leafA", "ip", "route", "show", "10.2.0.0/24")
	require.NoError(t, err)
	require.Contains(t, routes, "linkdown", "leafA marks the nexthop over r2: %s", routes)
	// Copies of already-placed chunks that arrived anyway (moved or
	// resent, on a new PSN): acknowledged, not placed again.
	dupA, dupB := d.conn[0].DuplicateChunks-s0.conn[0].DuplicateChunks, d.conn[1].DuplicateChunks-s0.conn[1].DuplicateChunks
	t.Logf("%s r2 link down mid-run: packets from leafA per spine %v; path failures %d; resent %d; placed A %d (READ %d) B %d (WRITE+SEND %d); copies that came again, not placed (DuplicateChunks): A %d B %d",
		f.name, per, d.failures, d.resent[0]+d.resent[1], d.placed[0], ld.r, d.placed[1], ld.w+ld.s, dupA, dupB)
	for i, n := range per {
		if i != 1 {
			require.NotZero(t, n, "spine r%d still carries traffic: %v", i+1, per)
		}
	}
	require.NoError(t, topo.SpineLinkUp(2))
	require.Equal(t, uint64(ld.w+ld.s), d.placed[1], "B placed each byte of the WRITE and SENDs exactly once")
	require.Equal(t, uint64(ld.r), d.placed[0], "A placed each byte of the READ exactly once")
}
