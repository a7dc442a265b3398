package queue

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRingFIFOAcrossGrowth(t *testing.T) {
	var r Ring[int]
	next, want := 0, 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		if rng.IntN(3) > 0 {
			r.Push(next)
			next++
		} else if r.Len() > 0 {
			require.Equal(t, want, r.Pop())
			want++
		}
	}
	require.Equal(t, next-want, r.Len())
	if r.Len() > 0 {
		require.Equal(t, want, *r.Front())
		require.Equal(t, next-1, r.PopBack())
	}
	r.Clear()
	require.Zero(t, r.Len())
}

func TestRingExtendKeepsStorage(t *testing.T) {
	r := NewRing[[]byte](4)
	*r.Extend() = make([]byte, 0, 64)
	r.Drop()
	for i := 0; i < 7; i++ { // come round to the same slot
		r.Push(nil)
		r.Pop()
	}
	require.Equal(t, 64, cap(*r.Extend()), "Extend hands back the slot's old storage")
}

type item struct {
	t  Timer
	id int
}

func TestTimerHeapOrdersAndMoves(t *testing.T) {
	h := NewTimerHeap(func(x *item) *Timer { return &x.t })
	rng := rand.New(rand.NewPCG(3, 4))
	items := make([]*item, 200)
	for i := range items {
		items[i] = &item{id: i}
		items[i].t.Deadline = rng.Int64N(1000)
		h.Set(items[i])
	}
	for i := 0; i < 500; i++ { // move, remove (Never) and re-add at random
		x := items[rng.IntN(len(items))]
		if rng.IntN(4) == 0 {
			x.t.Deadline = Never
		} else {
			x.t.Deadline = rng.Int64N(1000)
		}
		h.Set(x)
	}
	var want []int64
	for _, x := range items {
		if x.t.Deadline != Never {
			want = append(want, x.t.Deadline)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	require.Equal(t, len(want), h.Len())
	for _, d := range want {
		require.Equal(t, d, h.Min())
		x := h.PopMin()
		require.Equal(t, d, x.t.Deadline)
		require.Zero(t, x.t.index)
	}
	h.Remove(items[0]) // not queued: no effect
	require.Zero(t, h.Len())
}
