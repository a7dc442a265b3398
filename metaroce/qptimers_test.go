package metaroce_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// blackout makes the fixture's link carry nothing from now on.
func (f *fixture) blackout() {
	for _, e := range []uint16{49152, 49153, 49154, 49155} {
		f.p.Link.AddBlackout(memlink.Blackout{Entropy: e, AnyPlane: true, At: int64(f.p.Now)})
	}
}

// A QP's no-ACK limit (timeout x (retry_cnt+1)) fails its oldest work with
// StatusRetryExceeded and flushes the rest, no sooner than the limit and
// long before the connection's peer-dead timer; the connection and its
// other streams stay up.
func TestQPNoAckLimit(t *testing.T) {
	cfg := mr.Config{PeerDeadTimeout: time.Second, KeepaliveInterval: 10 * time.Millisecond}
	f := newFixture(t, cfg, memlink.Config{Seed: 21})
	target, _ := region(t, f.pb, 1<<20, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	timers := verbs.QPTimers{Timeout: 12, RetryCnt: 3, RNRRetry: 7, MinRNRTimer: 12}
	limit := timers.NoAckLimit()
	require.Equal(t, 4*4096*time.Nanosecond<<12, limit) // 67.1 ms
	f.qa.SetTimers(f.p.Now, timers)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 4096), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)

	f.blackout()
	start := f.p.Now
	f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	f.post(t, verbs.SendWR{ID: 3, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
	w2 := f.wait(t, f.cqa)
	took := time.Duration(f.p.Now - start)
	require.Equal(t, uint64(2), w2.WRID)
	require.Equal(t, verbs.StatusRetryExceeded, w2.Status)
	require.GreaterOrEqual(t, took, limit, "failed before the QP's limit")
	require.Less(t, took, limit+time.Millisecond)
	w3 := f.wait(t, f.cqa)
	require.Equal(t, uint64(3), w3.WRID)
	require.Equal(t, verbs.StatusFlushed, w3.Status)
	require.Equal(t, uint64(1), f.ca.Counters().QPAckTimeouts)
	require.True(t, f.ca.Established(), "the connection's own peer-dead timer (1 s) has not run out")
	require.ErrorIs(t, f.qa.PostSend(f.p.Now, verbs.SendWR{ID: 4, Opcode: verbs.WRWrite}), mr.ErrStreamError)
}

// The limit bounds the wait for an acknowledgement, not the QP's life:
// acknowledged work restarts the clock, so a QP kept busy for many times
// its limit (a 1 Gb/s link, 1 MiB queued) never fails, and an idle QP has
// no clock at all.
func TestQPNoAckLimitRestartsOnAcks(t *testing.T) {
	f := newFixture(t, mr.Config{}, memlink.Config{Seed: 22, RateBps: 1e9})
	target, _ := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	timers := verbs.QPTimers{Timeout: 8, RetryCnt: 0, RNRRetry: 7} // 1.05 ms
	f.qa.SetTimers(f.p.Now, timers)
	for round := range 2 {
		start := f.p.Now
		const n = 16
		for i := range n {
			f.post(t, verbs.SendWR{ID: uint64(i), Opcode: verbs.WRWrite, Local: f.src.SGE(0, 64<<10), RemoteAddr: target.Addr(), RKey: target.RKey()})
		}
		for range n {
			require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		}
		busy := time.Duration(f.p.Now - start)
		t.Logf("round %d: %d x 64 KiB WRITEs, busy %v, limit %v", round, n, busy, timers.NoAckLimit())
		require.Greater(t, busy, 4*timers.NoAckLimit())
		// Idle for longer than the limit: an empty send queue has no clock.
		end := f.p.Now + verbs.Time(3*timers.NoAckLimit())
		require.NoError(t, f.p.RunUntil(func() bool { return f.p.Now >= end }, end+1e9))
	}
	// A READ's responses are its acknowledgement: a 1 MiB READ (8 ms at
	// 1 Gb/s) does not fail for want of ACKs either.
	remote, _ := region(t, f.pb, 1<<20, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	local, _ := region(t, f.pa, 1<<20, verbs.AccessLocalWrite)
	start := f.p.Now
	f.post(t, verbs.SendWR{ID: 99, Opcode: verbs.WRRead, Local: local.SGE(0, 1<<20), RemoteAddr: remote.Addr(), RKey: remote.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	require.Greater(t, time.Duration(f.p.Now-start), 4*timers.NoAckLimit())
	require.Zero(t, f.ca.Counters().QPAckTimeouts)
}

// Timeout 0 is infinite: the QP never gives up; only the connection's
// peer-dead timer ends its work.
func TestQPNoAckLimitInfinite(t *testing.T) {
	cfg := mr.Config{PeerDeadTimeout: 50 * time.Millisecond, KeepaliveInterval: 5 * time.Millisecond}
	f := newFixture(t, cfg, memlink.Config{Seed: 23})
	target, _ := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 0, RetryCnt: 7, RNRRetry: 7})
	f.blackout()
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 4096), RemoteAddr: target.Addr(), RKey: target.RKey()})
	wc := f.wait(t, f.cqa)
	require.Equal(t, verbs.StatusRetryExceeded, wc.Status)
	require.Equal(t, verbs.FailPeerDead, f.ca.FailReason())
	require.Zero(t, f.ca.Counters().QPAckTimeouts)
}

// rnr_retry: 0 fails at the first RNR NAK, n after n retries, and 7 retries
// without limit (beyond the endpoint's RNRRetries); the waits are the
// responder QP's min_rnr_timer.
func TestQPRNRBudget(t *testing.T) {
	for _, n := range []uint8{0, 3} {
		f := newFixture(t, mr.Config{RNRRetries: 7, RNRBackoff: 10 * time.Microsecond}, memlink.Config{Seed: 24})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: n})
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 100)})
		wc := f.wait(t, f.cqa)
		require.Equal(t, verbs.StatusRNRRetryExceeded, wc.Status, "rnr_retry %d", n)
		require.Equal(t, uint64(n), f.ca.Counters().RNRRetries, "rnr_retry %d", n)
	}

	t.Run("7 retries forever at min_rnr_timer", func(t *testing.T) {
		f := newFixture(t, mr.Config{RNRRetries: 2, RNRBackoff: 10 * time.Microsecond}, memlink.Config{Seed: 25})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: 7})
		f.qb.SetTimers(f.p.Now, verbs.QPTimers{MinRNRTimer: 14}) // 1.28 ms
		dst, db := region(t, f.pb, 128, verbs.AccessLocalWrite)
		start := f.p.Now
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 100)})
		const want = 40 // far beyond the endpoint's 2
		require.NoError(t, f.p.RunUntil(func() bool { return f.ca.Counters().RNRRetries >= want }, f.p.Now+10e9))
		took := time.Duration(f.p.Now - start)
		wait := verbs.RNRTimer(14)
		require.GreaterOrEqual(t, took, (want-1)*wait, "retried sooner than min_rnr_timer")
		require.Less(t, took, (want+1)*(wait+100*time.Microsecond))
		require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 128)}))
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		require.Equal(t, f.src.Bytes()[:100], db[:100])
	})

	t.Run("an RNR back-off does not run the no-ACK clock", func(t *testing.T) {
		f := newFixture(t, mr.Config{}, memlink.Config{Seed: 26})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 8, RetryCnt: 0, RNRRetry: 7}) // 1.05 ms
		f.qb.SetTimers(f.p.Now, verbs.QPTimers{MinRNRTimer: 0})                       // 655 ms
		dst, _ := region(t, f.pb, 128, verbs.AccessLocalWrite)
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 100)})
		require.NoError(t, f.p.RunUntil(func() bool { return f.ca.Counters().RNRRetries >= 2 }, f.p.Now+10e9))
		require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 2, Local: dst.SGE(0, 128)}))
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		require.Zero(t, f.ca.Counters().QPAckTimeouts)
	})
}

// The no-ACK clock adds stores to the packet path, not allocations: with
// every QP holding verbs.QPTimers, the steady state still allocates nothing.
func TestPacketPathAllocsWithQPTimers(t *testing.T) {
	defer mr.SetAggregateChecks(mr.SetAggregateChecks(false))
	for _, sh := range []packetPathShape{{8, 1, 1, ppMTU, mr.SecurityNone, 0, 0}, {64, 1024, 1, ppMTU, mr.SecurityNone, 0, 0}} {
		t.Run(sh.String(), func(t *testing.T) {
			pp := newPacketPath(t, sh)
			for _, q := range pp.qps {
				q.SetTimers(pp.now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12})
			}
			pp.run(4 * ppDepth)
			before := pp.data
			allocs := testing.AllocsPerRun(20, func() { pp.run(64) })
			if pp.data-before < 20*64 {
				t.Fatalf("only %d data packets in the measured runs", pp.data-before)
			}
			pp.check()
			if allocs != 0 {
				t.Fatalf("%v allocations per 64 data packets, want 0", allocs)
			}
		})
	}
}
