package metaroce_test

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Destroying one queue pair (ibv_destroy_qp) must leave the connection and
// the other queue pairs working at both ends, flush only its own work, and
// place nothing into memory on its behalf afterwards. (Closing the
// connection, the only way before, flushed the peer's other queue pairs.)
func TestDestroyOneQPKeepsTheOthers(t *testing.T) {
	f := newFixture(t, mr.Config{MTU: 1024}, memlink.Config{Seed: 3})
	// Stream 1 beside the fixture's stream 0, at both ends.
	cqa1, cqb1 := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	qa1, err := f.ca.CreateQP(1, verbs.QPAttr{PD: f.pa, SendCQ: cqa1, RecvCQ: cqa1})
	require.NoError(t, err)
	qb1, err := f.cb.CreateQP(1, verbs.QPAttr{PD: f.pb, SendCQ: cqb1, RecvCQ: cqb1})
	require.NoError(t, err)
	target, tb := region(t, f.pb, 8<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)

	require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 40}))
	require.NoError(t, f.qb.Destroy(f.p.Now))
	require.ErrorIs(t, f.qb.Destroy(f.p.Now), verbs.ErrQPDestroyed)
	wc := f.wait(t, f.cqb)
	require.Equal(t, uint64(40), wc.WRID)
	require.Equal(t, verbs.StatusFlushed, wc.Status, "the destroyed QP's own receive is flushed")
	require.ErrorIs(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 41}), verbs.ErrQPDestroyed)
	require.ErrorIs(t, f.qb.PostSend(f.p.Now, verbs.SendWR{ID: 42, Opcode: verbs.WRSend}), verbs.ErrQPDestroyed)

	// A WRITE on the destroyed stream is not placed at B.
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 4096), RemoteAddr: target.Addr(), RKey: target.RKey()})
	// The other stream carries on, both ways.
	require.NoError(t, qb1.PostRecv(f.p.Now, verbs.RecvWR{ID: 7}))
	require.NoError(t, qa1.PostSend(f.p.Now, verbs.SendWR{ID: 2, Opcode: verbs.WRWriteImm, Local: f.src.SGE(0, 3000),
		RemoteAddr: target.Addr() + 4096, RKey: target.RKey(), Imm: 9}))
	wa := f.wait(t, cqa1)
	require.Equal(t, verbs.WorkCompletion{WRID: 2, Status: verbs.StatusSuccess, Opcode: verbs.WCWrite, ByteLen: 3000, QPN: qa1.QPN()}, wa)
	wb := f.wait(t, cqb1)
	require.Equal(t, verbs.StatusSuccess, wb.Status)
	require.Equal(t, f.src.Bytes()[:3000], tb[4096:4096+3000])
	require.True(t, f.ca.Established())
	require.True(t, f.cb.Established())
	require.Equal(t, bytes.Repeat([]byte{0xEE}, 4096), tb[:4096], "nothing placed for the destroyed QP")
	require.Zero(t, f.cqa.Len(), "the peer's queue pair of the destroyed stream is not flushed")

	// The peer's WRITE on the destroyed stream is refused (receiver not
	// ready) until its retries run out; only that queue pair fails.
	wa0 := f.wait(t, f.cqa)
	require.Equal(t, uint64(1), wa0.WRID)
	require.Equal(t, verbs.StatusRNRRetryExceeded, wa0.Status)
	require.Equal(t, bytes.Repeat([]byte{0xEE}, 4096), tb[:4096])
	require.True(t, f.ca.Established())
	require.NoError(t, qb1.PostRecv(f.p.Now, verbs.RecvWR{ID: 8}))
	require.NoError(t, qa1.PostSend(f.p.Now, verbs.SendWR{ID: 3, Opcode: verbs.WRWriteImm, Local: f.src.SGE(0, 100),
		RemoteAddr: target.Addr() + 4096, RKey: target.RKey(), Imm: 10}))
	require.Equal(t, verbs.StatusSuccess, f.wait(t, cqa1).Status)
}

// A late copy of a message the destroyed queue pair had already completed
// is acknowledged, not refused: the original's ACK was lost (or outrun by
// the sender's timer), the program saw its receive complete and destroyed
// the queue pair at once (ibv_rc_pingpong's last iteration does), and the
// copy then reached a stream that is closed at this end. A receiver-not-
// ready answer made the sender restart a message that had been delivered,
// until its retries ran out against a peer that had already exited.
func TestDestroyedQPAcksLateCopies(t *testing.T) {
	for name, op := range map[string]verbs.WROpcode{"send": verbs.WRSend, "send-imm": verbs.WRSendImm,
		"write": verbs.WRWrite, "write-imm": verbs.WRWriteImm} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, mr.Config{MTU: 1024}, memlink.Config{Seed: 5})
			target, tb := region(t, f.pb, 4096, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
			recvBuf, _ := region(t, f.pb, 4096, verbs.AccessLocalWrite)
			recvs := op != verbs.WRWrite
			if recvs {
				require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 9, Local: recvBuf.SGE(0, 4096)}))
			}
			// Every packet sent from 1.5 us after the post until 1 ms is
			// lost: the one-packet message (sent at once) arrives 2 us
			// after the post, its ACK does not.
			start := int64(f.p.Now)
			for _, e := range []uint16{49152, 49153, 49154, 49155} {
				f.p.Link.AddBlackout(memlink.Blackout{Entropy: e, AnyPlane: true, At: start + 1500, Until: start + 1e6})
			}
			f.post(t, verbs.SendWR{ID: 1, Opcode: op, Local: f.src.SGE(0, 1000), RemoteAddr: target.Addr(), RKey: target.RKey(), Imm: 5})
			if recvs {
				wb := f.wait(t, f.cqb)
				require.Equal(t, verbs.StatusSuccess, wb.Status)
			} else {
				require.NoError(t, f.p.RunUntil(func() bool { return bytes.Equal(tb[:1000], f.src.Bytes()[:1000]) }, f.p.Now+1e6))
			}
			require.Less(t, int64(f.p.Now), start+1e6, "delivered before the blackout ends")
			require.Zero(t, f.cqa.Len(), "the sender has no ACK yet")
			require.NoError(t, f.qb.Destroy(f.p.Now))
			wa := f.wait(t, f.cqa)
			require.Equal(t, uint64(1), wa.WRID)
			require.Equal(t, verbs.StatusSuccess, wa.Status, "a delivered message completes at its sender")
			require.NotZero(t, f.ca.Counters().Retransmits, "the sender did resend")
			require.Zero(t, f.cb.Counters().RNRNaksSent, "the copy was not refused")
		})
	}
}
