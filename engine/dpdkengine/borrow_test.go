//go:build dpdk

package dpdkengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/metaroce"
)

// TestBorrowLockStep drives both shards of a memif pair the way the CLI
// does: the application goroutine borrows the shard, posts and polls, and
// lets it run one iteration at a time (Release, Borrow). A WRITE arrives
// whole, a loan costs no allocation, and after Shard.Stop the same ports
// take a new transport.
func TestBorrowLockStep(t *testing.T) {
	p := newMemifPair(t, 12, Impairment{}, 1, 1024)
	for i := 0; i < 2; i++ {
		require.NoError(t, p.sh[i].Borrow())
	}
	released := false
	defer func() {
		if !released {
			p.sh[0].Release()
			p.sh[1].Release()
		}
	}()
	step := func() {
		for i := 0; i < 2; i++ {
			p.sh[i].Release()
			require.NoError(t, p.sh[i].Borrow())
		}
	}
	// A's handle for B, as an application adds a peer it was told about.
	h, err := p.eng[0].AddPeer([4]byte{10, 0, 0, 2})
	require.NoError(t, err)
	require.Equal(t, metaroce.PeerHandle(1), h, "the static neighbour's handle")
	ca, err := p.ep[0].Connect(p.sh[0].Now(), h)
	require.NoError(t, err)
	var cb *metaroce.Conn
	deadline := time.Now().Add(10 * time.Second)
	for cb == nil || !ca.Established() {
		require.True(t, time.Now().Before(deadline), "connection not up")
		if c, ok := p.ep[1].Accept(); ok {
			cb = c
		}
		step()
	}
	const n = 256 << 10
	src, dst := p.region(n), p.region(n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	pa, pb := p.ep[0].AllocPD(), p.ep[1].AllocPD()
	cqa, cqb := metaroce.NewCompletionQueue(16), metaroce.NewCompletionQueue(16)
	qa, err := ca.CreateQP(1, metaroce.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa})
	require.NoError(t, err)
	_, err = cb.CreateQP(1, metaroce.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb})
	require.NoError(t, err)
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	md, err := pb.RegisterMR(dst, metaroce.AccessLocalWrite|metaroce.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, qa.PostSend(p.sh[0].Now(), metaroce.SendWR{ID: 1, Opcode: metaroce.WRWrite, Local: ms.SGE(0, n),
		RemoteAddr: md.Addr(), RKey: md.RKey()}))
	var wcs [4]metaroce.WorkCompletion
	for cqa.Poll(wcs[:]) == 0 {
		require.True(t, time.Now().Before(deadline), "WRITE not complete")
		step()
	}
	require.Equal(t, metaroce.StatusSuccess, wcs[0].Status)
	require.Equal(t, src, dst)
	c := p.sh[0].CountersLent()
	require.NotZero(t, c.TxFrames)
	allocs := testing.AllocsPerRun(200, step)
	require.Zero(t, allocs, "a loan allocates nothing")
	p.sh[0].Release()
	p.sh[1].Release()
	released = true

	// Stop detaches the shard: the same ports take a new transport.
	p.sh[1].Stop()
	require.ErrorIs(t, p.sh[1].Borrow(), ErrStopped)
	ep, err := metaroce.NewEndpoint(metaroce.Config{Node: 3, Incarnation: 1, MTU: 1024, AcceptIncoming: true})
	require.NoError(t, err)
	sh, err := p.eng[1].Run(ep)
	require.NoError(t, err)
	require.NoError(t, sh.Borrow())
	sh.Release()
	require.NoError(t, p.eng[1].SetImpairment(Impairment{Loss: 0.5}))
	require.Error(t, p.eng[1].SetImpairment(Impairment{Loss: 1}))
}
