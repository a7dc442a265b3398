package metaroce

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestLostNakIsRepeated: when the NAK of a refused packet is lost, the
// sender resends the packet, the receiver refuses it again with the same
// wire status (even though the receive it claimed has already completed
// with its local status), and the work request completes with the error.
func TestLostNakIsRepeated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     verbs.WROpcode
		access verbs.Access
		recv   uint32
		want   verbs.Status
		local  verbs.Status
	}{
		{"WRITE_IMM without remote write", verbs.WRWriteImm, verbs.AccessLocalWrite, 100, verbs.StatusRemoteAccessError, verbs.StatusLocalAccessError},
		{"SEND longer than the receive", verbs.WRSend, verbs.AccessLocalWrite, 50, verbs.StatusLocalLengthError, verbs.StatusLocalLengthError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWirePair(t, Config{Paths: 2, MTU: 256})
			a, b := w.ep[0], w.ep[1]
			ca, cb := w.connect(t)
			pda, pdb := a.AllocPD(), b.AllocPD()
			cqa, cqb := verbs.NewCompletionQueue(8), verbs.NewCompletionQueue(8)
			qa, _ := ca.CreateQP(0, verbs.QPAttr{PD: pda, SendCQ: cqa})
			qb, _ := cb.CreateQP(0, verbs.QPAttr{PD: pdb, RecvCQ: cqb})
			mra, _ := pda.RegisterMR(make([]byte, 1000), verbs.AccessLocalWrite)
			dst := make([]byte, 1000)
			mrb, _ := pdb.RegisterMR(dst, tc.access)
			require.NoError(t, qb.PostRecv(w.now, verbs.RecvWR{ID: 9, Local: mrb.SGE(0, int(tc.recv))}))
			require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 1, Opcode: tc.op, Local: mra.SGE(0, 100), RemoteAddr: mrb.Addr(), RKey: mrb.RKey(), Imm: 5}))
			naks := 0
			w.drop = func(from int, pkt []byte) bool {
				var h Header
				if h.Decode(pkt) == nil && from == 1 && h.Opcode == OpNak {
					naks++
					return naks == 1 // lose the first NAK
				}
				return false
			}
			var wc [1]verbs.WorkCompletion
			w.runUntil(t, func() bool { return cqa.Poll(wc[:]) == 1 }, w.now+1e9)
			require.Equal(t, tc.want, wc[0].Status)
			require.GreaterOrEqual(t, naks, 2)
			require.Zero(t, ca.Counters().Malformed)
			require.Equal(t, 1, cqb.Poll(wc[:]))
			require.Equal(t, tc.local, wc[0].Status)
			require.Equal(t, make([]byte, 1000), dst)
		})
	}
}

// TestEveryRefusalIsNakable: every status the receiver puts in a NAK must
// pass the decoder's check, or the sender would drop the NAK as malformed.
func TestEveryRefusalIsNakable(t *testing.T) {
	for _, st := range []verbs.Status{verbs.StatusRemoteAccessError, verbs.StatusLocalLengthError, verbs.StatusRemoteInvalidReq, verbs.StatusReceiverNotReady} {
		require.True(t, nakable(st), "%v", st)
	}
	for _, st := range []verbs.Status{verbs.StatusSuccess, verbs.StatusLocalAccessError, verbs.StatusFlushed, verbs.StatusRetryExceeded} {
		require.False(t, nakable(st), "%v", st)
	}
}
