//go:build dpdk

package dpdkengine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// memifPair is two engines joined by memif pair k, each running a
// metaroce endpoint on its shard: A (10.0.0.1) connects, B (10.0.0.2)
// accepts.
type memifPair struct {
	t      *testing.T
	eng    [2]*Engine
	sh     [2]*Shard
	ep     [2]*metaroce.Endpoint
	regs   []*mempool.Region
	queues int
	goMem  bool // region hands out Go heap memory instead (not DPDK's)
}

// closePair shuts two engines joined by a memif pair down: both stop
// polling first, then the client side (B) closes, and A closes only once
// its link is down, i.e. once the interrupt thread has handled the
// disconnect (see Engine.WaitLinkDown).
func closePair(t *testing.T, eng [2]*Engine) {
	for _, e := range eng {
		e.Stop()
	}
	require.NoError(t, eng[1].Close())
	require.NoError(t, eng[0].WaitLinkDown(5*time.Second))
	// memif marks the link down before its interrupt thread has finished
	// tearing the connection down; give it time before A stops its port.
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, eng[0].Close())
}

// guard is the bytes of pattern around every destination.
const guard = 4096

func fillGuard(b []byte) {
	for i := 0; i < guard; i++ {
		b[i], b[len(b)-1-i] = 0xa5, 0x5a
	}
}

func checkGuard(t *testing.T, b []byte, what string) {
	for i := 0; i < guard; i++ {
		if b[i] != 0xa5 || b[len(b)-1-i] != 0x5a {
			t.Fatalf("%s: guard byte %d changed", what, i)
		}
	}
}

var ips = [2]string{"10.0.0.1", "10.0.0.2"}

func newMemifPair(t *testing.T, k int, impair Impairment, queues int, mtu int) *memifPair {
	return newMemifPairQ(t, k, impair, queues, mtu, 16)
}

func newMemifPairPaths(t *testing.T, k int, impair Impairment, mtu, paths int) *memifPair {
	return newMemifPairQ(t, k, impair, 1, mtu, paths)
}

func newMemifPairQ(t *testing.T, k int, impair Impairment, queues int, mtu, paths int) *memifPair {
	return newMemifEngines(t, k, impair, queues).withEndpoints(mtu, paths)
}

// withEndpoints runs a metaroce endpoint on a shard of each engine (B
// accepts).
func (p *memifPair) withEndpoints(mtu, paths int) *memifPair {
	t := p.t
	for i := 0; i < 2; i++ {
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: mtu,
			Paths: paths, AcceptIncoming: i == 1, ConnectRetries: 1000})
		require.NoError(t, err)
		p.ep[i] = ep
		sh, err := p.eng[i].Run(ep)
		require.NoError(t, err)
		p.sh[i] = sh
	}
	return p
}

// newMemifEngines starts the two engines of memif pair k with their links
// up, and no shard.
func newMemifEngines(t *testing.T, k int, impair Impairment, queues int) *memifPair {
	return newMemifEnginesCfg(t, k, impair, queues, nil)
}

// newMemifEnginesCfg is newMemifEngines with engine i's configuration
// changed by mut (when not nil) before it starts.
func newMemifEnginesCfg(t *testing.T, k int, impair Impairment, queues int, mut func(i int, c *Config)) *memifPair {
	p := &memifPair{t: t, queues: queues}
	// Registered first, so it runs after the engines have stopped: a
	// region must not be freed while a shard may still place into it.
	t.Cleanup(func() {
		for _, r := range p.regs {
			require.NoError(t, r.Free())
		}
	})
	for i := 0; i < 2; i++ {
		cfg := Config{
			Ports:    []PortConfig{{Name: fmt.Sprintf("net_memif%d", 2*k+i), IP: ips[i], Queues: queues}},
			PoolSize: 4095,
			Impair:   impair,
		}
		if i == 0 {
			// A knows B statically, without its MAC: ARP resolves it.
			cfg.Neighbours = []Neighbour{{Peer: 1, IP: ips[1]}}
		}
		if mut != nil {
			mut(i, &cfg)
		}
		e, err := Start(cfg, nil)
		require.NoError(t, err)
		p.eng[i] = e
	}
	// Shut both down in the one safe order (see closePair).
	t.Cleanup(func() { closePair(t, p.eng) })
	for i := 0; i < 2; i++ {
		require.NoError(t, p.eng[i].WaitLink(10*time.Second))
	}
	return p
}

func (p *memifPair) region(n int) []byte {
	if p.goMem {
		return make([]byte, n)
	}
	r, err := mempool.NewRegion(n)
	require.NoError(p.t, err)
	require.True(p.t, r.InDPDKMemory())
	p.regs = append(p.regs, r)
	return r.Bytes()
}

// await runs cond on shard i until it holds or the wall-clock limit passes.
func (p *memifPair) await(i int, what string, limit time.Duration, cond func(now verbs.Time) bool) {
	deadline := time.Now().Add(limit)
	for {
		ok := false
		require.NoError(p.t, p.sh[i].Do(func(now verbs.Time) { ok = cond(now) }))
		if ok {
			return
		}
		require.True(p.t, time.Now().Before(deadline), "%s: not done after %v", what, limit)
		time.Sleep(200 * time.Microsecond)
	}
}

// connect opens a connection from A to B and waits until both ends have it.
func (p *memifPair) connect() (ca, cb *metaroce.Conn) {
	require.NoError(p.t, p.sh[0].Do(func(now verbs.Time) {
		var err error
		ca, err = p.ep[0].Connect(now, 1)
		require.NoError(p.t, err)
	}))
	p.await(1, "accept", 10*time.Second, func(verbs.Time) bool {
		if c, ok := p.ep[1].Accept(); ok {
			cb = c
		}
		return cb != nil
	})
	p.await(0, "established", 10*time.Second, func(verbs.Time) bool { return ca.Established() })
	return ca, cb
}

// xfer is one verified transfer over a pair: A WRITEs, SENDs and READs
// with B, and the test checks every byte and that every payload byte was
// placed exactly once (the core's PayloadPlaced counters equal the bytes
// moved, resends and duplicates notwithstanding).
type xfer struct {
	writeN, sendN, sendMsgs, readN int
}

type xferResult struct {
	ca, cb *metaroce.Conn
}

func (p *memifPair) transfer(x xfer, seed uint64) xferResult {
	t := p.t
	rng := rand.New(rand.NewPCG(seed, 1))
	// Destinations have guard zones on both sides, inside the registered
	// region: nothing but the target bytes may change.
	srcA := p.region(x.writeN + x.sendN)
	dstAll := p.region(max(x.readN, 1) + 2*guard)
	srcB := p.region(max(x.readN, 1))
	dstBll := p.region(x.writeN + x.sendN + 2*guard)
	fillGuard(dstAll)
	fillGuard(dstBll)
	dstA := dstAll[guard : len(dstAll)-guard]
	dstB := dstBll[guard : len(dstBll)-guard]
	for i := range srcA {
		srcA[i] = byte(rng.Uint32())
	}
	for i := range srcB {
		srcB[i] = byte(rng.Uint32())
	}

	var ca, cb *metaroce.Conn
	var qa, qb *metaroce.QueuePair
	var cqa, cqb *verbs.CompletionQueue
	var mSrcA, mDstA, mSrcB, mDstB *verbs.MemoryRegion
	require.NoError(t, p.sh[0].Do(func(now verbs.Time) {
		var err error
		ca, err = p.ep[0].Connect(now, 1)
		require.NoError(t, err)
	}))
	p.await(1, "accept", 10*time.Second, func(verbs.Time) bool {
		if c, ok := p.ep[1].Accept(); ok {
			cb = c
		}
		return cb != nil
	})
	p.await(0, "established", 10*time.Second, func(verbs.Time) bool { return ca.Established() })

	require.NoError(t, p.sh[1].Do(func(now verbs.Time) {
		pd := p.ep[1].AllocPD()
		cqb = verbs.NewCompletionQueue(max(64, x.sendMsgs+8))
		var err error
		qb, err = cb.CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: cqb, RecvCQ: cqb})
		require.NoError(t, err)
		mSrcB, err = pd.RegisterMR(srcB, verbs.AccessRemoteRead)
		require.NoError(t, err)
		mDstB, err = pd.RegisterMR(dstBll, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		if x.sendMsgs > 0 {
			per := x.sendN / x.sendMsgs
			for i := 0; i < x.sendMsgs; i++ {
				require.NoError(t, qb.PostRecv(now, verbs.RecvWR{ID: uint64(i), Local: mDstB.SGE(guard+x.writeN+i*per, per)}))
			}
		}
	}))
	require.NoError(t, p.sh[0].Do(func(now verbs.Time) {
		pd := p.ep[0].AllocPD()
		cqa = verbs.NewCompletionQueue(max(64, x.sendMsgs+8))
		var err error
		qa, err = ca.CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		mSrcA, err = pd.RegisterMR(srcA, 0)
		require.NoError(t, err)
		mDstA, err = pd.RegisterMR(dstAll, verbs.AccessLocalWrite)
		require.NoError(t, err)
		if x.writeN > 0 {
			require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 100, Opcode: verbs.WRWrite, Local: mSrcA.SGE(0, x.writeN),
				RemoteAddr: mDstB.Addr() + guard, RKey: mDstB.RKey()}))
		}
		if x.sendMsgs > 0 {
			per := x.sendN / x.sendMsgs
			for i := 0; i < x.sendMsgs; i++ {
				require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 200 + uint64(i), Opcode: verbs.WRSend, Local: mSrcA.SGE(x.writeN+i*per, per)}))
			}
		}
		if x.readN > 0 {
			require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 300, Opcode: verbs.WRRead, Local: mDstA.SGE(guard, x.readN),
				RemoteAddr: mSrcB.Addr(), RKey: mSrcB.RKey()}))
		}
	}))
	wantA := x.sendMsgs
	if x.writeN > 0 {
		wantA++
	}
	if x.readN > 0 {
		wantA++
	}
	var wcs [16]verbs.WorkCompletion
	seen := map[uint64]bool{}
	gotA, gotB := 0, 0
	p.await(0, "sender completions", 60*time.Second, func(verbs.Time) bool {
		n := cqa.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status, "wr %d", wc.WRID)
			require.False(t, seen[wc.WRID], "wr %d completed twice", wc.WRID)
			seen[wc.WRID] = true
		}
		gotA += n
		return gotA == wantA
	})
	p.await(1, "receiver completions", 10*time.Second, func(verbs.Time) bool {
		n := cqb.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status, "recv %d", wc.WRID)
			require.Equal(t, verbs.WCRecv, wc.Opcode)
			require.Equal(t, uint64(gotB), wc.WRID, "receives complete in order")
			gotB++
		}
		return gotB == x.sendMsgs
	})
	// Every byte where it belongs, nothing else touched, and no completion
	// beyond one per work request.
	require.Equal(t, srcA[:x.writeN+x.sendN], dstB[:x.writeN+x.sendN], "WRITE/SEND data")
	require.Equal(t, srcB[:x.readN], dstA[:x.readN], "READ data")
	checkGuard(t, dstAll, "A's READ destination")
	checkGuard(t, dstBll, "B's WRITE/SEND destination")
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, p.sh[0].Do(func(verbs.Time) { require.Zero(t, cqa.Len(), "extra completions at A") }))
	require.NoError(t, p.sh[1].Do(func(verbs.Time) { require.Zero(t, cqb.Len(), "extra completions at B") }))
	// The core places a payload again when a packet it already had comes
	// back on another path (a resend after a lost ACK, or after a
	// spurious timeout when the machine stalls a shard longer than the
	// RTO); that rewrites the same bytes. So: every byte placed at least
	// once, the bytes right (above), and the duplicates logged.
	var placedA, placedB uint64
	require.NoError(t, p.sh[1].Do(func(verbs.Time) { placedB = cb.Counters().PayloadPlaced }))
	require.NoError(t, p.sh[0].Do(func(verbs.Time) { placedA = ca.Counters().PayloadPlaced }))
	require.GreaterOrEqual(t, placedB, uint64(x.writeN+x.sendN), "B placed every byte")
	require.GreaterOrEqual(t, placedA, uint64(x.readN), "A placed every byte")
	t.Logf("payload bytes placed again (duplicates): A %d, B %d", placedA-uint64(x.readN), placedB-uint64(x.writeN+x.sendN))
	return xferResult{ca: ca, cb: cb}
}

func TestMemifTransfer(t *testing.T) {
	p := newMemifPair(t, 0, Impairment{}, 1, 1024)
	p.transfer(xfer{writeN: 1 << 20, sendN: 256 << 10, sendMsgs: 4, readN: 1 << 20}, 1)
	for i := 0; i < 2; i++ {
		c, err := p.sh[i].Counters()
		require.NoError(t, err)
		t.Logf("shard %d: rx %d delivered %d tx %d drops %v arp req %d rep %d learned %d noneigh %d loops %d sleeps %d",
			i, c.RxFrames, c.RxDelivered, c.TxFrames, c.DropMap(), c.ARPRequestsSent, c.ARPRepliesSent, c.ARPLearned, c.NoNeighbour, c.Loops, c.IdleSleeps)
		require.Zero(t, c.Dropped(), "shard %d drops %v", i, c.DropMap())
	}
	ca, _ := p.sh[0].Counters()
	cb, _ := p.sh[1].Counters()
	require.Equal(t, uint64(1), ca.ARPRequestsSent, "A resolved B with ARP")
	require.Equal(t, uint64(1), cb.ARPRepliesSent)
	// Every frame one side sent, the other received: the shards still
	// run (a last ACK or keepalive may be on the ring), so compare in a
	// quiet moment.
	require.Eventually(t, func() bool {
		ca, _ := p.sh[0].Counters()
		cb, _ := p.sh[1].Counters()
		return ca.TxFrames == cb.RxFrames && cb.TxFrames == ca.RxFrames
	}, 5*time.Second, time.Millisecond, "frames sent and received differ")
}

// TestMemifTransferImpaired: the profile's receive impairment stage drops
// and reorders packets on both sides (memif itself never does); the core
// repairs every loss and every byte still lands once. The pair runs with
// zero-copy TX on (udp_checksum zero: memif has no checksum offload), with
// fewer slots (8) than a burst (32), so a burst mixes packets sent by
// reference with packets copied for want of a slot: the resends go out
// from the region too. A second transfer from Go heap memory (not DPDK's)
// must be copied, every qualifying packet counted. A third, of 64-byte
// SENDs, goes out coalesced (Config.Coalesce 8), impaired alike. Once the
// engines stop, nothing the driver was lent is still held.
func TestMemifTransferImpaired(t *testing.T) {
	cfg, err := LoadConfig(strings.NewReader("ports: [{name: x, ip: 10.0.0.1}]\nimpair: {loss: 0.02, reorder: 0.05, seed: 11}\n"))
	require.NoError(t, err)
	p := newMemifEnginesCfg(t, 1, cfg.Impair, 1, func(i int, c *Config) {
		c.UDPChecksum = "zero"
		c.ZeroCopyMin = 256
		c.ZeroCopySlots = 8
		c.Coalesce = 8
	}).withEndpoints(1024, 16)
	for i := range p.sh {
		require.True(t, p.sh[i].ZeroCopy(), "shard %d", i)
	}
	r := p.transfer(xfer{writeN: 2 << 20, sendN: 256 << 10, sendMsgs: 4, readN: 1 << 20}, 2)
	var zc [2]Counters
	for i := 0; i < 2; i++ {
		c, err := p.sh[i].Counters()
		require.NoError(t, err)
		t.Logf("shard %d: rx %d delivered %d impaired %d reordered %d; zero-copy %d, fallbacks %v", i, c.RxFrames, c.RxDelivered,
			c.Drops[DropImpaired], c.Reordered, c.ZeroCopySent, c.ZeroCopyFallback)
		require.NotZero(t, c.Drops[DropImpaired])
		require.NotZero(t, c.Reordered)
		require.Equal(t, c.Drops[DropImpaired], c.Dropped(), "only the impairment drops: %v", c.DropMap())
		require.Zero(t, c.ZeroCopyFallback[ZCNotDPDKMemory], "shard %d: the regions are DPDK memory", i)
		require.Zero(t, c.ZeroCopyFallback[ZCNoMbuf], "shard %d", i)
		zc[i] = c
	}
	// Every 1 KiB-MTU data packet qualified: A's WRITE and SEND, B's READ
	// responses, by reference or copied for want of a slot; both happened.
	for i, least := range []uint64{(2<<20 + 256<<10) / 1024, (1 << 20) / 1024} {
		c := zc[i]
		require.GreaterOrEqual(t, c.ZeroCopySent+c.ZeroCopyFallback[ZCNoSlot], least, "shard %d", i)
		require.NotZero(t, c.ZeroCopySent, "shard %d", i)
		require.NotZero(t, c.ZeroCopyFallback[ZCNoSlot], "shard %d", i)
	}
	var resent uint64
	require.NoError(t, p.sh[0].Do(func(verbs.Time) { resent = r.ca.Counters().Retransmits }))
	t.Logf("A retransmitted %d packets", resent)
	require.NotZero(t, resent)

	p.goMem = true
	p.transfer(xfer{writeN: 256 << 10, readN: 128 << 10}, 3)
	// 64-byte SENDs, under the zero-copy threshold: built whole, so A's
	// frames take follow-ons (coalesce 8), lost and reordered with them.
	p.goMem = false
	before, err := p.sh[0].Counters()
	require.NoError(t, err)
	p.transfer(xfer{sendN: 64 * 512, sendMsgs: 512}, 4)
	after, err := p.sh[0].Counters()
	require.NoError(t, err)
	t.Logf("A: %d follow-on packets in %d frames for 512 SENDs", after.Coalesced-before.Coalesced, after.TxFrames-before.TxFrames)
	require.Greater(t, after.Coalesced-before.Coalesced, uint64(256), "most small SENDs shared a frame")
	for i := range p.eng {
		p.eng[i].Stop()
	}
	for i, sh := range p.sh {
		<-sh.Done()
		c, ok := sh.StoppedCounters()
		require.True(t, ok)
		t.Logf("shard %d stopped: zero-copy %d, fallbacks %v, in flight %d", i, c.ZeroCopySent, c.ZeroCopyFallback, c.ZeroCopyInFlight)
		require.Equal(t, zc[i].ZeroCopySent, c.ZeroCopySent, "shard %d lent Go memory", i)
		require.Zero(t, c.ZeroCopyInFlight, "shard %d: payloads still lent", i)
		st := sh.Stats() // what the CLI's Prometheus metrics read
		require.True(t, st.ZeroCopy)
		require.Equal(t, c.ZeroCopySent, st.ZeroCopySent)
		require.Equal(t, c.ZeroCopyFallback[ZCNoSlot], st.ZeroCopyFallbackSlots)
		require.Equal(t, c.ZeroCopyFallback[ZCNotDPDKMemory], st.ZeroCopyFallbackMemory)
	}
	a, b := p.sh[0].pub, p.sh[1].pub
	require.GreaterOrEqual(t, a.ZeroCopyFallback[ZCNotDPDKMemory], uint64((256<<10)/1024))
	require.GreaterOrEqual(t, b.ZeroCopyFallback[ZCNotDPDKMemory], uint64((128<<10)/1024))
	for _, reg := range p.regs {
		require.Zero(t, reg.InFlight())
	}
}
