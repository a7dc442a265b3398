//go:build dpdk

package dpdkengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// ackFlushRound: the receiver's shard (end 1-from) is held by a 20 ms
// command while the sender (end from) posts 64 one-packet SENDs, so that
// the receiver finds them waiting in its ring and reads them in full
// bursts of 32. It checks that every SEND completes at both ends with its
// bytes in place, and returns the sends the receiver made in the middle
// of a burst (Counters.AckFlushes) meanwhile and the packets the sender
// sent as follow-ons in coalesced frames.
func ackFlushRound(t *testing.T, p *memifPair, from int) (flushes, coalesced uint64) {
	const msgs, size = 64, 64
	to := 1 - from
	var conn [2]*metaroce.Conn
	conn[0], conn[1] = p.connect()
	src, dst := p.region(msgs*size), p.region(msgs*size)
	for i := range src {
		src[i] = byte(i*7 + from)
	}
	var qp [2]*metaroce.QueuePair
	cq := [2]*verbs.CompletionQueue{verbs.NewCompletionQueue(2 * msgs), verbs.NewCompletionQueue(2 * msgs)}
	var mSrc *verbs.MemoryRegion
	for i := range 2 {
		require.NoError(t, p.sh[i].Do(func(now verbs.Time) {
			pd := p.ep[i].AllocPD()
			var err error
			qp[i], err = conn[i].CreateQP(1, verbs.QPAttr{PD: pd, SendCQ: cq[i], RecvCQ: cq[i]})
			require.NoError(t, err)
			if i == from {
				mSrc, err = pd.RegisterMR(src, 0)
				require.NoError(t, err)
				return
			}
			mDst, err := pd.RegisterMR(dst, verbs.AccessLocalWrite)
			require.NoError(t, err)
			for k := range msgs {
				require.NoError(t, qp[i].PostRecv(now, verbs.RecvWR{ID: uint64(k), Local: mDst.SGE(k*size, size)}))
			}
		}))
	}
	c0, err := p.sh[to].Counters()
	require.NoError(t, err)
	s0, err := p.sh[from].Counters()
	require.NoError(t, err)

	// Hold the receiver, then let the sender fill its ring.
	held, released := make(chan struct{}), make(chan error, 1)
	go func() {
		released <- p.sh[to].Do(func(verbs.Time) {
			close(held)
			time.Sleep(20 * time.Millisecond)
		})
	}()
	<-held
	require.NoError(t, p.sh[from].Do(func(now verbs.Time) {
		for k := range msgs {
			require.NoError(t, qp[from].PostSend(now, verbs.SendWR{ID: uint64(k), Opcode: verbs.WRSend, Local: mSrc.SGE(k*size, size)}))
		}
	}))
	require.NoError(t, <-released)

	for _, i := range []int{from, to} {
		var wcs [16]verbs.WorkCompletion
		got := 0
		p.await(i, "completions", 10*time.Second, func(verbs.Time) bool {
			n := cq[i].Poll(wcs[:])
			for _, wc := range wcs[:n] {
				require.Equal(t, verbs.StatusSuccess, wc.Status, "end %d, wr %d", i, wc.WRID)
			}
			got += n
			return got == msgs
		})
	}
	require.Equal(t, src, dst, "every message where it belongs")
	c1, err := p.sh[to].Counters()
	require.NoError(t, err)
	s1, err := p.sh[from].Counters()
	require.NoError(t, err)
	flushes = c1.AckFlushes - c0.AckFlushes
	t.Logf("sender %d: %d frames, %d packets as follow-ons; receiver %d: %d frames in %d driver calls, %d sends in the middle of a burst",
		from, s1.TxFrames-s0.TxFrames, s1.Coalesced-s0.Coalesced,
		to, c1.RxFrames-c0.RxFrames, c1.DriverCalls-c0.DriverCalls, flushes)
	return flushes, s1.Coalesced - s0.Coalesced
}

// testAckFlush runs on a pair whose end A has ack_flush -1 and end B the
// default (16), both coalescing by default: B, receiving full bursts,
// sends the ACK the first 16 packets of a burst asked for before it
// handles the rest; A never sends in the middle of a burst. Some of the
// SENDs go as follow-ons (the rest are resends while B is held, which
// never share a frame), so B's bursts mix coalesced frames and lone ones.
func testAckFlush(t *testing.T, p *memifPair) {
	require.Equal(t, -1, p.eng[0].cfg.AckFlush)
	require.Equal(t, 16, p.eng[1].cfg.AckFlush, "the default")
	flushes, coalesced := ackFlushRound(t, p, 0)
	require.NotZero(t, flushes, "B read full bursts after the hold and sent an ACK in their middle")
	require.NotZero(t, coalesced, "A coalesced some of the SENDs")
	flushes, _ = ackFlushRound(t, p, 1)
	require.Zero(t, flushes, "A (ack_flush -1) sent nothing in the middle of a burst")
}
