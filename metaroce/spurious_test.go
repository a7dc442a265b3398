package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// stallRun WRITEs size bytes from A to B over w, twice, each time with the
// whole connection stalled once mid-transfer for stall (every packet sent
// during it arrives when it ends, in order: a descheduled receiver or
// forwarding CPU). It returns A's
// connection counters after each transfer.
func stallRun(t *testing.T, w *wirePair, ca, cb *Conn, size int, stall time.Duration) [2]ConnCounters {
	t.Helper()
	pda, pdb := w.ep[0].AllocPD(), w.ep[1].AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(8), verbs.NewCompletionQueue(8)
	qa, err := ca.CreateQP(1, verbs.QPAttr{PD: pda, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	_, err = cb.CreateQP(1, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb})
	require.NoError(t, err)
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 31)
	}
	mra, err := pda.RegisterMR(src, 0)
	require.NoError(t, err)
	var out [2]ConnCounters
	for round := range out {
		dst := make([]byte, size)
		mrb, err := pdb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		start := w.now
		require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: uint64(round), Opcode: verbs.WRWrite, Local: mra.SGE(0, size),
			RemoteAddr: mrb.Addr(), RKey: mrb.RKey()}))
		var wc [1]verbs.WorkCompletion
		from := start + verbs.Time(20*time.Microsecond)
		until := from + verbs.Time(stall)
		stalled := false
		// Every packet sent in [from, until) arrives at until, in the
		// order sent: the connection is held as a whole.
		w.extra = func(int, []byte) verbs.Time {
			if w.now >= from && w.now < until {
				stalled = true
				return until - w.now
			}
			return 0
		}
		w.runUntil(t, func() bool { return cqa.Poll(wc[:]) == 1 }, start+verbs.Time(time.Second))
		w.extra = nil
		require.True(t, stalled, "round %d finished before the stall", round)
		require.Greater(t, w.now-start, verbs.Time(stall), "round %d: the stall held the transfer", round)
		require.Equal(t, verbs.StatusSuccess, wc[0].Status)
		require.Equal(t, src, dst)
		out[round] = *ca.Counters()
	}
	return out
}

// A connection-wide stall longer than the RTO (nothing is lost) is not a
// path failure: no path is judged failed for it, since no path was heard
// while the others were silent. The first stall's late ACKs raise every
// path's peak RTT (and prove its timeouts spurious), so a second stall of
// the same length moves nothing: only a silence longer than twice the
// delays the connection's paths have lately seen moves a path's packets
// (issue 13: the netns fabric's spurious resends on a loaded 2-core
// host).
func TestStallIsNotLoss(t *testing.T) {
	w := newWirePair(t, Config{Paths: 8, MTU: 1024})
	ca, cb := w.connect(t)
	const stall = 2 * time.Millisecond
	c := stallRun(t, w, ca, cb, 8<<20, stall)
	wait := ca.patience(w.now)
	t.Logf("first stall: timeouts proven spurious %d, moved %d, path failures %d; second stall: resent %d more; patience %v",
		c[0].SpuriousTimeouts, moved(ca), c[0].PathFailures, c[1].DataResent-c[0].DataResent, wait)
	require.NotZero(t, c[0].SpuriousTimeouts, "the stall outlasted the RTO: some timeout fired and was proven spurious")
	require.Zero(t, c[1].PathFailures, "a connection-wide stall failed paths")
	require.GreaterOrEqual(t, wait, stall, "patience covers the stall the paths saw")
	require.Equal(t, c[0].DataResent, c[1].DataResent, "the second, equal stall resent data")
	require.Zero(t, c[1].SackGaps, "nothing was lost")
}

func moved(c *Conn) (n uint64) {
	for i := range c.tx {
		n += c.tx[i].c.MovedAway
	}
	return n
}

// A path's peak RTT halves for every peakMemory without a sample that
// raises it. Patience is twice the median peak of the healthy paths: one
// sick path with huge delays does not raise it, a delay most paths saw
// does; it stays within MaxRTO and PeerDeadTimeout/8.
func TestPatienceIsTheMedianPeak(t *testing.T) {
	c := testConn(t, 5)
	cfg := &c.ep.cfg
	now := verbs.Time(time.Second)
	for i := range c.tx {
		c.tx[i].sample(100 * time.Microsecond)
		c.tx[i].raisePeak(now, 100*time.Microsecond)
	}
	p := &c.tx[0]
	p.raisePeak(now, 3*time.Millisecond)
	p.raisePeak(now, time.Millisecond) // lower: kept
	require.Equal(t, 3*time.Millisecond, p.peak)
	require.Equal(t, 200*time.Microsecond, c.patience(now), "one sick path does not raise patience")
	for i := 1; i < 3; i++ {
		c.tx[i].raisePeak(now, 2*time.Millisecond)
	}
	require.Equal(t, 4*time.Millisecond, c.patience(now), "three of five paths saw 2ms or more")
	p.decayPeak(now.Add(peakMemory - 1))
	require.Equal(t, 3*time.Millisecond, p.peak)
	p.decayPeak(now.Add(2 * peakMemory))
	require.Equal(t, 750*time.Microsecond, p.peak)
	require.Less(t, c.patience(now.Add(20*peakMemory)), 200*time.Microsecond, "decayed: an idle minute leaves no patience beyond the RTO")
	for i := range c.tx {
		c.tx[i].raisePeak(now.Add(21*peakMemory), time.Hour)
	}
	require.Equal(t, min(cfg.MaxRTO, cfg.PeerDeadTimeout/8), c.patience(now.Add(21*peakMemory)))
}

// A peer that pauses (descheduled) right after its last data packets is
// as silent as one that pauses before them. A and B WRITE to each other;
// at from, B stops: everything it sends from then until the pause ends
// is held, except the data packets of its first few microseconds, which
// were already on their way. They come after A's paths heard their last
// ACK, so the peer was heard from after the paths went silent, but they
// were in flight when it paused: they prove nothing about A's routes, and
// no path of A is judged failed for the pause. (TestTwoPlanes over memif
// on a loaded host: one plane's 8 paths failed in a 2.2 ms pause of the
// peer, whose last packet came 26µs after they went silent.)
func TestPeerPauseAfterLastWordIsNotFailure(t *testing.T) {
	w := newWirePair(t, Config{Paths: 8, MTU: 1024})
	ca, cb := w.connect(t)
	const size = 8 << 20
	var qp [2]*QueuePair
	var cq [2]*verbs.CompletionQueue
	var src, dst [2][]byte
	var local, remote [2]*verbs.MemoryRegion
	for i, c := range []*Conn{ca, cb} {
		pd := w.ep[i].AllocPD()
		cq[i] = verbs.NewCompletionQueue(8)
		var err error
		qp[i], err = c.CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: cq[i], RecvCQ: cq[i]})
		require.NoError(t, err)
		src[i], dst[i] = make([]byte, size), make([]byte, size)
		for k := range src[i] {
			src[i][k] = byte(k*31 + i)
		}
		local[i], err = pd.RegisterMR(src[i], 0)
		require.NoError(t, err)
		remote[i], err = pd.RegisterMR(dst[i], verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
	}
	start := w.now
	from := start + verbs.Time(20*time.Microsecond)
	until := from + verbs.Time(5*time.Millisecond)
	const lastWords = verbs.Time(3 * time.Microsecond)
	var spoken, held int
	w.extra = func(sender int, pkt []byte) verbs.Time {
		if w.now < from || w.now >= until {
			return 0
		}
		if sender == 1 && w.now < from+lastWords && len(pkt) > 512 {
			spoken++ // a data packet: ACKs are far shorter
			return 0
		}
		held++
		return until - w.now
	}
	for i := range qp {
		require.NoError(t, qp[i].PostSend(w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: local[i].SGE(0, size),
			RemoteAddr: remote[1-i].Addr(), RKey: remote[1-i].RKey()}))
	}
	var done [2]bool
	w.runUntil(t, func() bool {
		var wc [1]verbs.WorkCompletion
		for i := range cq {
			if cq[i].Poll(wc[:]) == 1 {
				require.Equal(t, verbs.StatusSuccess, wc[0].Status)
				done[i] = true
			}
		}
		return done[0] && done[1]
	}, start+verbs.Time(time.Second))
	require.Equal(t, src[0], dst[1])
	require.Equal(t, src[1], dst[0])
	c := ca.Counters()
	t.Logf("B's last words %d, packets held %d; A: timeouts proven spurious %d, moved %d, path failures %d, patience %v",
		spoken, held, c.SpuriousTimeouts, moved(ca), c.PathFailures, ca.patience(w.now))
	require.NotZero(t, spoken, "B's last data packets came through")
	require.NotZero(t, held, "the pause held packets")
	require.Greater(t, w.now-start, until-start, "the pause held the transfer")
	require.NotZero(t, c.SpuriousTimeouts, "the pause outlasted the RTO")
	require.Zero(t, c.PathFailures, "a pause after the peer's last words failed A's paths")
}
