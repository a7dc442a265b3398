package metaroce

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// startSequencesAt moves every path of c (both directions' state on this
// side) to begin its sequence space at psn, as if it had run for a long
// time. Both ends must be moved for the same connection.
func startSequencesAt(c *Conn, psn PSN) {
	c.materialize() // an accepted connection's paths exist from its first packet on
	for i := range c.tx {
		c.tx[i].next, c.tx[i].una = psn, psn
		c.rx[i].sb = rxScoreboard{cum: psn}
	}
}

// TestSequenceWraparound runs lossy transfers across the 2^32 wrap of every
// path's PSN space.
func TestSequenceWraparound(t *testing.T) {
	w := newWirePair(t, Config{Paths: 3, MTU: 1024, PathWindow: 256})
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := w.ep[0], w.ep[1]
	ca, cb := w.connect(t)
	const start = PSN(1<<32 - 300)
	startSequencesAt(ca, start)
	startSequencesAt(cb, start)
	w.drop = func(int, []byte) bool { return rng.Float64() < 0.05 }

	pa, pb := a.AllocPD(), b.AllocPD()
	cq := verbs.NewCompletionQueue(16)
	qa, err := ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq})
	require.NoError(t, err)
	_, err = cb.CreateQP(0, verbs.QPAttr{PD: pb})
	require.NoError(t, err)
	src := make([]byte, 4<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src))
	ms, err := pa.RegisterMR(src, 0)
	require.NoError(t, err)
	md, err := pb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, qa.PostSend(w.now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, len(src)), RemoteAddr: md.Addr(), RKey: md.RKey()}))
	var wc [1]verbs.WorkCompletion
	w.runUntil(t, func() bool { return cq.Poll(wc[:]) == 1 }, 10e9)
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)
	require.Equal(t, src, dst)
	for i := range ca.tx {
		// Every path went well past the wrap.
		require.True(t, start.Less(ca.tx[i].next) && ca.tx[i].next < start, "path %d ended at %d", i, ca.tx[i].next)
		require.Greater(t, ca.tx[i].c.RetransmitSACK, uint64(0))
	}
}
