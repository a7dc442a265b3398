package mempair

import (
	"context"
	"errors"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/metaroce"
)

// TestEndsRunApps drives a WRITE through the pair's ends as
// engine.Backends: B's app accepts and makes its QP, A's connects and
// waits for the completion; Stats and the capture see the packets.
func TestEndsRunApps(t *testing.T) {
	p, err := New(metaroce.Config{}, metaroce.Config{}, memlink.Config{Seed: 3, Delay: 2000, Loss: 0.01})
	require.NoError(t, err)
	a, b := p.End(0), p.End(1)
	_, err = a.AddPeer(netip.MustParseAddrPort("10.0.0.9:4794"))
	require.Error(t, err, "a peer that is not the other side")
	h, err := a.AddPeer(b.LocalAddr())
	require.NoError(t, err)
	require.Equal(t, verbs.PeerHandle(1), h)
	require.Equal(t, b.LocalIP(), a.PeerIP(h))
	var capA []engine.Packet
	require.NoError(t, a.SetCapture(func(_ int64, pk engine.Packet) {
		pk.Payload = nil
		capA = append(capA, pk)
	}))

	const n = 1 << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i * 13)
	}
	pa, pb := p.EP[0].AllocPD(), p.EP[1].AllocPD()
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	md, err := pb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	cqa, cqb := verbs.NewCompletionQueue(8), verbs.NewCompletionQueue(8)

	ca, err := p.EP[0].Connect(a.Now(), h)
	require.NoError(t, err)
	var cb *metaroce.Conn
	var qa *metaroce.QueuePair
	posted, got := false, 0
	var wcs [4]verbs.WorkCompletion
	appA := engine.AppFunc(func(now verbs.Time) (bool, error) {
		if !ca.Established() || cb == nil {
			return false, nil
		}
		if !posted {
			var err error
			if qa, err = ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa}); err != nil {
				return false, err
			}
			posted = true
			return false, qa.PostSend(now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, n),
				RemoteAddr: md.Addr(), RKey: md.RKey()})
		}
		got += cqa.Poll(wcs[got:])
		return got > 0, nil
	})
	appB := engine.AppFunc(func(verbs.Time) (bool, error) {
		if cb == nil {
			if cb, _ = p.EP[1].Accept(); cb != nil {
				_, err := cb.CreateQP(0, verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb})
				return err == nil, err
			}
		}
		return false, nil
	})
	require.NoError(t, p.Run(context.Background(), appA, appB))
	require.Equal(t, verbs.StatusSuccess, wcs[0].Status)
	require.Equal(t, src, dst)

	st := a.Stats()
	require.NotZero(t, st.RxPackets)
	require.GreaterOrEqual(t, st.TxBytes, uint64(n))
	require.Equal(t, st.TxPackets+st.RxPackets, uint64(len(capA)), "the capture saw every packet A sent and received")
	require.True(t, capA[0].Sent)
	require.Equal(t, a.LocalIP(), capA[0].SrcIP)
	// The link lost some of what A sent: B received less.
	require.Less(t, b.Stats().RxPackets, st.TxPackets)
}

// TestEndRunEnds: an App's error ends the Run, a cancelled ctx ends it,
// and a Run with nothing left to happen is stalled, not spinning.
func TestEndRunEnds(t *testing.T) {
	p, err := New(metaroce.Config{}, metaroce.Config{}, memlink.Config{Seed: 1})
	require.NoError(t, err)
	e := p.End(0)
	boom := errors.New("boom")
	require.ErrorIs(t, e.Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) { return false, boom })), boom)
	require.ErrorIs(t, e.Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) { return false, nil })), ErrStalled)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err = p.EP[0].Connect(p.Now, 1) // keeps timers pending: the pair never stalls
	require.NoError(t, err)
	err = e.Run(ctx, engine.AppFunc(func(verbs.Time) (bool, error) {
		if calls++; calls == 5 {
			cancel()
		}
		return false, nil
	}))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 5, calls)
	require.Error(t, e.Attach(nil))
	require.NoError(t, e.Close())
}
