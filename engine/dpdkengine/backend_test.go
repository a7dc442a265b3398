//go:build dpdk

package dpdkengine

import (
	"context"
	"errors"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/metaroce"
)

// TestBackendRunsAppOnShard drives both ends of a memif pair the way the
// CLI does, through engine.Backend: each end's application runs on its
// shard's loop, stepped exactly once per iteration; between Runs the
// shard is parked and the test goroutine owns the transport. A WRITE
// arrives whole, a loop iteration allocates nothing, a cancelled Run
// returns ctx's error, Stats has real counters, and after Close the same
// ports take a new transport.
func TestBackendRunsAppOnShard(t *testing.T) {
	p := newMemifEngines(t, 12, Impairment{}, 1)
	var be [2]*Backend
	var ep [2]*metaroce.Endpoint
	for i := 0; i < 2; i++ {
		e, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: 1024,
			AcceptIncoming: i == 1, ConnectRetries: 1000})
		require.NoError(t, err)
		ep[i], be[i] = e, p.eng[i].Backend()
		require.NoError(t, be[i].Attach(e))
	}
	require.Error(t, be[0].Attach(ep[0]), "a second Attach")
	require.Error(t, be[0].SetCapture(func(int64, engine.Packet) {}))
	require.NoError(t, be[0].SetCapture(nil))
	port := p.eng[0].Config().UDPPort
	_, err := be[0].AddPeer(netip.MustParseAddrPort("10.0.0.2:1"))
	require.Error(t, err, "a peer on another UDP port")
	h, err := be[0].AddPeer(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), port))
	require.NoError(t, err)
	require.Equal(t, verbs.PeerHandle(1), h, "the static neighbour's handle")
	require.Equal(t, [4]byte{10, 0, 0, 2}, be[0].PeerIP(h))
	require.Equal(t, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port), be[0].LocalAddr())

	// B's region and PD, set up while B's shard is parked (this goroutine
	// owns B's transport until B's Run starts).
	const n = 256 << 10
	src, dst := p.region(n), p.region(n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	pb := ep[1].AllocPD()
	md, err := pb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	cqb := verbs.NewCompletionQueue(16)

	// B runs until cancelled: it accepts and then creates its QP.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var bReady atomic.Bool
	bErr := make(chan error, 1)
	go func() {
		var cb *metaroce.Conn
		bErr <- be[1].Run(ctx, engine.AppFunc(func(verbs.Time) (bool, error) {
			if cb == nil {
				cb, _ = ep[1].Accept()
			}
			if cb != nil && cb.Established() && !bReady.Load() {
				if _, err := cb.CreateQP(1, verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
					return false, err
				}
				bReady.Store(true)
			}
			return false, nil
		}))
	}()

	// once checks App.Step is called once per shard loop iteration; it
	// reads the shard's own counters, which only its goroutine may (the
	// race detector tells if Step ran anywhere else).
	sh := be[0].sh
	last := uint64(0)
	once := func() {
		if l := sh.c.Loops; last != 0 && l != last+1 {
			t.Errorf("App.Step after loop %d, previous after %d: not once per iteration", l, last)
		}
		last = sh.c.Loops
	}
	ca, err := ep[0].Connect(be[0].Now(), h)
	require.NoError(t, err)
	deadline := time.Now().Add(10 * time.Second)
	errLate := errors.New("not done in time")
	require.NoError(t, be[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) {
		once()
		if time.Now().After(deadline) {
			return false, errLate
		}
		return ca.Established() && bReady.Load(), nil
	})))

	// Between Runs: A's shard is parked, this goroutine posts.
	pa := ep[0].AllocPD()
	cqa := verbs.NewCompletionQueue(16)
	qa, err := ca.CreateQP(1, verbs.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	require.NoError(t, qa.PostSend(be[0].Now(), verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, n),
		RemoteAddr: md.Addr(), RKey: md.RKey()}))
	var wcs [4]verbs.WorkCompletion
	got := 0
	last = 0
	require.NoError(t, be[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) {
		once()
		if time.Now().After(deadline) {
			return false, errLate
		}
		got += cqa.Poll(wcs[got:])
		return got > 0, nil
	})))
	require.Equal(t, verbs.StatusSuccess, wcs[0].Status)
	require.Equal(t, src, dst)
	st := be[0].Stats()
	require.NotZero(t, st.TxPackets)
	require.NotZero(t, st.RxPackets)
	require.GreaterOrEqual(t, st.TxBytes, uint64(n), "the WRITE's payload went out")

	// A Run of 1000 iterations allocates what starting it costs, nothing
	// per iteration.
	calls := 0
	app := engine.AppFunc(func(verbs.Time) (bool, error) { calls++; return calls%1000 == 0, nil })
	allocs := testing.AllocsPerRun(10, func() { require.NoError(t, be[0].Run(context.Background(), app)) })
	require.Less(t, allocs, 20.0, "allocations per Run of 1000 iterations")

	// B's app has had nothing to do since the WRITE: after idle_spin
	// its loop naps instead of spinning on.
	c0, err := be[1].sh.Counters()
	require.NoError(t, err)
	time.Sleep(3 * p.eng[1].Config().IdleSpin)
	c1, err := be[1].sh.Counters()
	require.NoError(t, err)
	require.Greater(t, c1.IdleSleeps, c0.IdleSleeps, "an idle Run naps")

	cancel()
	select {
	case err := <-bErr:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("B's Run did not end on cancel")
	}

	// Close detaches the shard: the same ports take a new transport.
	require.NoError(t, be[1].Close())
	require.Error(t, be[1].Run(context.Background(), app), "Run after Close")
	e2, err := metaroce.NewEndpoint(metaroce.Config{Node: 3, Incarnation: 1, MTU: 1024, AcceptIncoming: true})
	require.NoError(t, err)
	nb := p.eng[1].Backend()
	require.NoError(t, nb.Attach(e2))
	require.NoError(t, nb.Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) { return true, nil })))
	require.NoError(t, nb.Close())
	require.NoError(t, p.eng[1].SetImpairment(Impairment{Loss: 0.5}))
	require.Error(t, p.eng[1].SetImpairment(Impairment{Loss: 1}))
}
