package rocev2_test

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// directPair opens QP qa on A and qb on B with OpenQP, as two verbs
// programs do after exchanging QPNs and PSNs out of band (no CM), under
// loss so that go-back-N runs too.
func directPair(t *testing.T, loss float64) (f *fixture) {
	t.Helper()
	f = &fixture{}
	f.p, f.ea, f.eb = pair(t, rocev2.Config{}, rocev2.Config{AcceptIncoming: false}, memlink.Config{Seed: 7, Delay: 2000,
		Loss: loss})
	f.pa, f.pb = f.ea.AllocPD(), f.eb.AllocPD()
	f.cqa, f.cqb = verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	const qpnA, qpnB, psnA, psnB = 0xC35001, 0xC35101, 0xFFFFF0, 0x123456 // A's PSNs wrap
	var err error
	f.qa, err = f.ea.OpenQP(f.p.Now, 1, rocev2.DirectQP{QPN: qpnA, RemoteQPN: qpnB, RecvPSN: psnB, SendPSN: 0,
		Attr: verbs.QPAttr{PD: f.pa, SendCQ: f.cqa, RecvCQ: f.cqa}})
	require.NoError(t, err)
	require.NoError(t, f.qa.SetSendPSN(psnA), "RTS sets sq_psn after the RTR that opened the QP")
	f.qb, err = f.eb.OpenQP(f.p.Now, 0, rocev2.DirectQP{QPN: qpnB, RemoteQPN: qpnA, RecvPSN: psnA, SendPSN: psnB,
		Attr: verbs.QPAttr{PD: f.pb, SendCQ: f.cqb, RecvCQ: f.cqb}})
	require.NoError(t, err)
	f.ca, f.cb = f.qa.Conn(), f.qb.Conn()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	f.src, err = f.pa.RegisterMR(buf, verbs.AccessLocalWrite)
	require.NoError(t, err)
	return f
}

// TestOpenQP: QPs connected out of band carry WRITE, SEND and READ with
// the QP numbers and PSNs the caller chose and no CM message on the wire;
// destroying one sends the peer nothing.
func TestOpenQP(t *testing.T) {
	for _, loss := range []float64{0, 0.1} {
		f := directPair(t, loss)
		require.Equal(t, verbs.QPN(0xC35001), f.qa.QPN())
		require.Equal(t, uint32(0xC35101), f.ca.RemoteQPN())
		require.True(t, f.ca.Established() && f.cb.Established())

		dst, dbuf := region(t, f.pb, 64<<10, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: f.src.SGE(0, 40000), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		require.True(t, bytes.Equal(dbuf[:40000], f.src.Bytes()[:40000]))

		rbuf, _ := region(t, f.pb, 8192, verbs.AccessLocalWrite)
		require.NoError(t, f.qb.PostRecv(f.p.Now, verbs.RecvWR{ID: 5, Local: rbuf.SGE(0, 8192)}))
		f.post(t, verbs.SendWR{ID: 2, Opcode: verbs.WRSendImm, Local: f.src.SGE(100, 5000), Imm: 77})
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		w := f.wait(t, f.cqb)
		require.Equal(t, verbs.StatusSuccess, w.Status)
		require.Equal(t, uint32(5000), w.ByteLen)
		require.Equal(t, uint32(77), w.Imm)

		back, bbuf := region(t, f.pa, 20000, verbs.AccessLocalWrite)
		require.NoError(t, f.qa.PostSend(f.p.Now, verbs.SendWR{ID: 3, Opcode: verbs.WRRead, Local: back.SGE(0, 20000),
			RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
		require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
		require.True(t, bytes.Equal(bbuf, dbuf[:20000]))

		require.Zero(t, f.ea.Counters().CMSent+f.eb.Counters().CMSent, "no CM message for out-of-band QPs")
		if loss > 0 {
			ca, cb := f.ca.Counters(), f.cb.Counters()
			require.NotZero(t, ca.DataResent+ca.Timeouts+cb.DataResent+cb.Timeouts, "the loss was repaired by go-back-N")
		}
		require.ErrorIs(t, f.qa.SetSendPSN(1), rocev2.ErrPSNLate)

		require.NoError(t, f.qa.Destroy(f.p.Now))
		// Nothing is left to send: the pair stalls (or runs out its time).
		if err := f.p.RunUntil(func() bool { return false }, f.p.Now+1e6); err != nil {
			require.ErrorIs(t, err, mempair.ErrStalled)
		}
		require.Zero(t, f.ea.Counters().CMSent, "destroying an out-of-band QP sends no DREQ")
		require.True(t, f.cb.Established(), "the peer QP is not told")
	}
}

// TestOpenQPRefusals: a QP number in use, out of range, or beyond MaxQPs.
func TestOpenQPRefusals(t *testing.T) {
	e, err := rocev2.NewEndpoint(rocev2.Config{MaxQPs: 2})
	require.NoError(t, err)
	pd := e.AllocPD()
	cq := verbs.NewCompletionQueue(4)
	attr := verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq}
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 1, RemoteQPN: 0x200, Attr: attr})
	require.ErrorIs(t, err, rocev2.ErrBadQPN)
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 0x300, RemoteQPN: 1 << 24, Attr: attr})
	require.ErrorIs(t, err, rocev2.ErrBadQPN)
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 0x300, RemoteQPN: 0x200, Attr: attr})
	require.NoError(t, err)
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 0x300, RemoteQPN: 0x201, Attr: attr})
	require.ErrorIs(t, err, rocev2.ErrQPNInUse)
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 0x301, RemoteQPN: 0x201, Attr: attr})
	require.NoError(t, err)
	_, err = e.OpenQP(0, 0, rocev2.DirectQP{QPN: 0x302, RemoteQPN: 0x202, Attr: attr})
	require.ErrorIs(t, err, rocev2.ErrNoQPN)
	require.Equal(t, 2, e.Connections())
}
