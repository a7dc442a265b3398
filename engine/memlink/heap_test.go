package memlink

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeapPopsInTimeThenSequenceOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h flightHeap
	const n = 5000
	for i := range n {
		// Few distinct times, so that many flights tie on at.
		h.push(flight{at: int64(r.IntN(50)), seq: uint64(i)})
	}
	require.Equal(t, n, h.len())
	prev := h.pop()
	for h.len() > 0 {
		f := h.pop()
		require.True(t, prev.before(&f), "popped %+v after %+v", f, prev)
		prev = f
	}
}

func TestHeapInterleavedPushPop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h flightHeap
	var seq uint64
	now := int64(0)
	for range 20000 {
		if h.len() == 0 || r.IntN(3) > 0 {
			h.push(flight{at: now + int64(r.IntN(100)), seq: seq})
			seq++
			continue
		}
		f := h.pop()
		require.GreaterOrEqual(t, f.at, now, "time went backwards")
		now = f.at
	}
}

func TestHeapPopClearsBufferReference(t *testing.T) {
	var h flightHeap
	h.push(flight{at: 1, buf: make([]byte, 1)})
	h.push(flight{at: 2, buf: make([]byte, 1)})
	h.pop()
	// The vacated tail slot must not keep a buffer alive.
	require.Nil(t, h[:2][1].buf)
}
