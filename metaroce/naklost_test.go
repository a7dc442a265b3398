package metaroce

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLostNakIsRepeated: when the NAK of a refused packet is lost, the
// sender resends the packet, the receiver refuses it again with the same
// wire status (even though the receive it claimed has already completed
// with its local status), and the work request completes with the error.
func TestLostNakIsRepeated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     WROpcode
		access Access
		recv   uint32
		want   Status
		local  Status
	}{
		{"WRITE_IMM without remote write", WRWriteImm, AccessLocalWrite, 100, StatusRemoteAccessError, StatusLocalAccessError},
		{"SEND longer than the receive", WRSend, AccessLocalWrite, 50, StatusLocalLengthError, StatusLocalLengthError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWirePair(t, Config{Paths: 2, MTU: 256})
			a, b := w.ep[0], w.ep[1]
			ca, cb := w.connect(t)
			pda, pdb := a.AllocPD(), b.AllocPD()
			cqa, cqb := NewCompletionQueue(8), NewCompletionQueue(8)
			qa, _ := ca.CreateQP(0, QPAttr{PD: pda, SendCQ: cqa})
			qb, _ := cb.CreateQP(0, QPAttr{PD: pdb, RecvCQ: cqb})
			mra, _ := pda.RegisterMR(make([]byte, 1000), AccessLocalWrite)
			dst := make([]byte, 1000)
			mrb, _ := pdb.RegisterMR(dst, tc.access)
			require.NoError(t, qb.PostRecv(w.now, RecvWR{ID: 9, Local: mrb.SGE(0, int(tc.recv))}))
			require.NoError(t, qa.PostSend(w.now, SendWR{ID: 1, Opcode: tc.op, Local: mra.SGE(0, 100), RemoteAddr: mrb.Addr(), RKey: mrb.RKey(), Imm: 5}))
			naks := 0
			w.drop = func(from int, pkt []byte) bool {
				var h Header
				if h.Decode(pkt) == nil && from == 1 && h.Opcode == OpNak {
					naks++
					return naks == 1 // lose the first NAK
				}
				return false
			}
			var wc [1]WorkCompletion
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
	for _, st := range []Status{StatusRemoteAccessError, StatusLocalLengthError, StatusRemoteInvalidReq, StatusReceiverNotReady} {
		require.True(t, st.nakable(), "%v", st)
	}
	for _, st := range []Status{StatusSuccess, StatusLocalAccessError, StatusFlushed, StatusRetryExceeded} {
		require.False(t, st.nakable(), "%v", st)
	}
}
