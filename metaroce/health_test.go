package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// testConn returns an established connection with n paths on one
// endpoint, for white-box tests of path health.
func testConn(t *testing.T, n int) *Conn {
	t.Helper()
	ep, err := NewEndpoint(Config{Node: 1, Incarnation: 1, Paths: n})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ep.newConn(verbs.PeerHandle(1), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.establish(0, &ConnectBody{Node: 2, Paths: uint16(n), MTU: 4096, Streams: 16, Planes: 1})
	c.materialize() // an accepted connection gets its paths at its first packet
	return c
}

// A path marked far more than its siblings, round after round, drains and
// takes a new entropy under a new generation; one marked like its siblings
// (a congested receiver, not an unlucky route) keeps its entropy.
func TestRerollPersistentlyCongestedPath(t *testing.T) {
	c := testConn(t, 4)
	cfg := &c.ep.cfg
	for i := range c.tx {
		c.tx[i].cc.alpha = 0.6
	}
	for r := 0; r < 3*cfg.RerollRounds; r++ {
		c.checkReroll(&c.tx[2])
	}
	if c.tx[2].rerolling {
		t.Fatalf("re-rolled a path marked like all its siblings")
	}
	for i := range c.tx {
		c.tx[i].cc.alpha = 0.05
	}
	p := &c.tx[2]
	p.cc.alpha = 0.8
	old, gen := p.entropy, p.gen
	for r := 0; r < cfg.RerollRounds-1; r++ {
		c.checkReroll(p)
	}
	if p.rerolling {
		t.Fatalf("re-rolled after %d rounds, want %d", cfg.RerollRounds-1, cfg.RerollRounds)
	}
	c.checkReroll(p)
	if !p.rerolling || p.room() != 0 {
		t.Fatalf("not draining after %d hot rounds (room %d)", cfg.RerollRounds, p.room())
	}
	p.inUse = 1
	c.finishReroll(p)
	if p.entropy != old {
		t.Fatalf("re-rolled with a packet still outstanding")
	}
	p.inUse = 0
	c.finishReroll(p)
	if p.entropy == old || p.gen != gen+1 || p.rerolling || p.c.Rerolls != 1 || c.c.PathRerolls != 1 {
		t.Fatalf("after re-roll: entropy %d (was %d) gen %d (was %d) rerolling %v counters %d/%d",
			p.entropy, old, p.gen, gen, p.rerolling, p.c.Rerolls, c.c.PathRerolls)
	}
	if p.cc.alpha != 0 || p.room() == 0 {
		t.Fatalf("re-rolled path starts congested: alpha %.2f room %d", p.cc.alpha, p.room())
	}
	for i := range c.tx {
		if i != 2 && c.tx[i].entropy == p.entropy {
			t.Fatalf("new entropy %d collides with path %d", p.entropy, i)
		}
	}
}

// A failed path is probed after PathReprobe; the probe's ACK brings it
// back with a fresh window. Probes that go unanswered stay outstanding in
// the same generation, so a late ACK still counts, and the back-off grows.
func TestFailedPathProbedAndRestored(t *testing.T) {
	c := testConn(t, 4)
	cfg := &c.ep.cfg
	p := &c.tx[1]
	now := verbs.Time(time.Millisecond)
	c.failPath(now, p)
	if !p.failed || p.room() != 0 || c.healthyPaths() != 3 {
		t.Fatalf("failed path still usable")
	}
	gen, first := p.gen, p.una // the new generation's first PSN
	at := p.reprobeAt
	if at != now.Add(cfg.PathReprobe) {
		t.Fatalf("first probe at %v, want after PathReprobe", at.Sub(now))
	}
	buf := make([]byte, c.ep.MaxPacketLen())
	c.onTimer(at)
	if _, ok := c.produce(at, buf); !ok {
		t.Fatalf("no probe sent")
	}
	// Unanswered: a second probe later, same generation, longer wait.
	c.onTimer(p.reprobeAt)
	if p.gen != gen || p.inUse != 2 {
		t.Fatalf("second probe: gen %d (want %d), outstanding %d (want 2)", p.gen, gen, p.inUse)
	}
	if _, ok := c.produce(p.reprobeAt, buf); !ok {
		t.Fatalf("no second probe sent")
	}
	// The first probe's ACK arrives late: the path is back.
	late := p.reprobeAt + verbs.Time(time.Microsecond)
	c.onAckBlock(late, &AckBlock{Path: 1, PathGen: gen, Cum: first + 1, TSEcho: at})
	if p.failed || p.c.Restores != 1 || p.cc.window() != cfg.PathWindow {
		t.Fatalf("not restored by a late probe ACK: failed %v restores %d window %d", p.failed, p.c.Restores, p.cc.window())
	}
}

// Loss far above the siblings', with no marks, fails a path; the same loss
// on every path (a lossy fabric) fails none.
func TestLossyPathJudgedFailed(t *testing.T) {
	c := testConn(t, 4)
	now := verbs.Time(time.Millisecond)
	for i := range c.tx {
		c.tx[i].cc.loss = 0.45
	}
	for i := range c.tx {
		c.onLoss(now, &c.tx[i])
	}
	if c.healthyPaths() != 4 {
		t.Fatalf("uniform loss failed %d paths", 4-c.healthyPaths())
	}
	for i := range c.tx {
		c.tx[i].cc.loss = 0.01
	}
	p := &c.tx[3]
	p.cc.loss = 0.45
	c.onLoss(now, p)
	if !p.failed {
		t.Fatalf("a path losing 45%% beside clean siblings was not failed")
	}
}

// inflightInvariant checks that the in-flight count is the packets
// outstanding on the paths not judged failed.
func inflightInvariant(t *testing.T, c *Conn) {
	t.Helper()
	n := 0
	for i := range c.tx {
		if !c.tx[i].failed {
			n += c.tx[i].inUse
		}
	}
	if c.limit.inflight != n {
		t.Fatalf("in flight %d, want %d (the healthy paths' outstanding packets)", c.limit.inflight, n)
	}
}

// A failed path's probes do not count in flight (they would block new data
// on the healthy paths behind the in-flight cap), and count again once it
// is restored.
func TestFailedPathProbesNotInFlight(t *testing.T) {
	c := testConn(t, 2)
	p := &c.tx[0]
	now := verbs.Time(time.Millisecond)
	c.sendNop(now, &c.tx[1], false)
	inflightInvariant(t, c)
	c.failPath(now, p)
	inflightInvariant(t, c)
	for i := 0; i < 5; i++ {
		c.reprobe(now, p)
		inflightInvariant(t, c)
	}
	if p.inUse != 5 || c.limit.inflight != 1 {
		t.Fatalf("probes %d, in flight %d; want 5 and 1", p.inUse, c.limit.inflight)
	}
	buf := make([]byte, c.ep.MaxPacketLen())
	for {
		if _, ok := c.produce(now, buf); !ok {
			break
		}
	}
	c.onAckBlock(now+1000, &AckBlock{Path: 0, PathGen: p.gen, Cum: p.una + 2, TSEcho: p.lastStamp})
	if p.failed {
		t.Fatalf("not restored")
	}
	inflightInvariant(t, c)
}

// inflightConsistent reports whether the connection's in-flight count is
// the packets in use on the paths it counts (txPath.uncounted).
func inflightConsistent(c *Conn) bool {
	n := 0
	for i := range c.tx {
		if !c.tx[i].uncounted {
			n += c.tx[i].inUse
		}
	}
	return n == c.limit.inflight
}

// A path dead before its first use, at an acceptor that has sent nothing
// yet (its first data are READ responses, in slow start): the first
// timeout moves its packet elsewhere and takes the path out of the
// in-flight count, so the READ completes about one RTO after it starts,
// not after the PathFailAfter timeouts (doubling) it takes to judge the
// path failed. And the acceptor's RTO comes from its ACCEPT-to-first-packet
// time (an upper bound on the RTT), not from InitialRTO.
func TestDeadPathAtFirstUseCostsOneRTO(t *testing.T) {
	for _, c := range []struct {
		rate float64
		idle time.Duration // the dialer's pause between connecting and its READ
	}{{0, 0}, {100e9, 0}, {100e9, 5 * time.Millisecond}} {
		rate := c.rate
		cfg := Config{Paths: 4, MTU: 1024, LinkRateBps: rate}
		w := newWirePair(t, cfg)
		ca, cb := w.connect(t)
		w.runUntil(t, func() bool { return w.now >= verbs.Time(c.idle) }, verbs.Time(c.idle)+verbs.Time(time.Second))
		pda, pdb := w.ep[0].AllocPD(), w.ep[1].AllocPD()
		cqa, cqb := verbs.NewCompletionQueue(8), verbs.NewCompletionQueue(8)
		qa, err := ca.CreateQP(0, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		_, err = cb.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
		require.NoError(t, err)
		src := make([]byte, 256<<10)
		for i := range src {
			src[i] = byte(i * 13)
		}
		mrb, err := pdb.RegisterMR(src, verbs.AccessRemoteRead)
		require.NoError(t, err)
		dst := make([]byte, len(src))
		mra, err := pda.RegisterMR(dst, verbs.AccessLocalWrite)
		require.NoError(t, err)
		// B's path 0 is dead from now on: every packet B sends on it.
		w.drop = func(from int, pkt []byte) bool {
			var h Header
			return from == 1 && h.Decode(pkt) == nil && h.Path == 0 && h.Opcode.Sequenced()
		}
		start := w.now
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRRead, Local: mra.SGE(0, len(dst)), RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
		var wc [1]verbs.WorkCompletion
		w.runUntil(t, func() bool {
			require.True(t, inflightConsistent(ca) && inflightConsistent(cb), "in-flight count drifted at t=%d", w.now)
			return cqa.Poll(wc[:]) == 1
		}, start+verbs.Time(50*time.Millisecond))
		require.Equal(t, verbs.StatusSuccess, wc[0].Status)
		require.Equal(t, src, dst)
		took := time.Duration(w.now - start)
		// 256 KiB at 100 Gb/s is ~21 us, the RTT 2 us: one RTO (MinRTO,
		// 50 us) and a little more. Before, it took three RTOs (rate 0)
		// or 1.5 ms (hints on: the dead path's packets held the slow
		// start), and 3 ms with an idle dialer's RTT "sample".
		// An idle dialer tells the acceptor nothing of the RTT: it waits
		// InitialRTO (it waited three times that, from an RTT "sample"
		// of the idle time with its variance).
		limit := 2 * w.ep[1].cfg.MinRTO
		if c.idle > 0 {
			limit += w.ep[1].cfg.InitialRTO
		}
		require.Less(t, took, limit, "rate %v idle %v: READ took %v", rate, c.idle, took)
		if c.idle == 0 {
			require.Equal(t, uint64(0), cb.Counters().PathFailures, "rate %v: moved at the first timeout, not judged failed yet", rate)
		}
		t.Logf("rate %v idle %v: READ of 256 KiB with B's path 0 dead took %v", rate, c.idle, took)
	}
}
