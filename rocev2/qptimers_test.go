package rocev2_test

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// A QP given verbs.QPTimers is held to them, not to the endpoint's
// configuration: its timeout and retry_cnt bound the retries of a dead
// path (here 3 retries of a 4.2 ms timeout where the endpoint says 7 of
// 1.05 ms), and the responder's min_rnr_timer and the requester's
// rnr_retry govern RNR.
func TestQPTimersOverrideConfig(t *testing.T) {
	t.Run("timeout and retry_cnt", func(t *testing.T) {
		f := newFixture(t, rocev2.Config{}, memlink.Config{Seed: 31})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 10, RetryCnt: 3, RNRRetry: 7})
		dst, _ := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		f.p.Link.AddBlackout(memlink.Blackout{Entropy: f.ca.SourcePort(), AnyPlane: true, At: int64(f.p.Now)})
		start := f.p.Now
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 8<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
		w := f.wait(t, f.cqa)
		require.Equal(t, verbs.StatusRetryExceeded, w.Status)
		took, to := time.Duration(f.p.Now-start), verbs.AckTimeout(10)
		require.GreaterOrEqual(t, took, 4*to)
		require.Less(t, took, 5*to)
		require.Equal(t, uint64(4), f.ca.Counters().Timeouts, "the first timeout and three retries")
	})
	t.Run("rnr_retry 0 and min_rnr_timer", func(t *testing.T) {
		f := newFixture(t, rocev2.Config{MinRNRTimer: 1}, memlink.Config{Seed: 32})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: 0})
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
		require.Equal(t, verbs.StatusRNRRetryExceeded, f.wait(t, f.cqa).Status)
		require.Equal(t, uint64(1), f.ca.Counters().RNRNaksReceived, "no retry after the first RNR NAK")
	})
	t.Run("rnr_retry 7 waits the responder's min_rnr_timer", func(t *testing.T) {
		f := newFixture(t, rocev2.Config{MinRNRTimer: 1, RNRRetry: 1}, memlink.Config{Seed: 33})
		f.qa.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: 7})
		f.qb.SetTimers(f.p.Now, verbs.QPTimers{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 14}) // 1.28 ms
		buf, _ := region(t, f.pb, 4096, verbs.AccessLocalWrite)
		start := f.p.Now
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Local: f.src.SGE(0, 3000)})
		const want = 10 // beyond the endpoint's RNRRetry 1
		require.NoError(t, f.p.RunUntil(func() bool { return f.ca.Counters().RNRNaksReceived >= want }, f.p.Now+1e10))
		require.GreaterOrEqual(t, time.Duration(f.p.Now-start), (want-1)*verbs.RNRTimer(14))
		require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 9, Local: buf.SGE(0, 4096)}))
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	})
}
