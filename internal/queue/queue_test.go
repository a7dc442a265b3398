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

// swapHeap is the timer heap as it was before it kept deadlines beside the
// objects and sifted by moving a hole: pairwise swaps, every comparison
// through the objects. TestTimerHeapLayoutAsSwaps holds TimerHeap to it.
type swapHeap struct{ items []*item }

func (h *swapHeap) less(i, j int) bool { return h.items[i].t.Deadline < h.items[j].t.Deadline }

func (h *swapHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].t.index, h.items[j].t.index = i+1, j+1
}

func (h *swapHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (h *swapHeap) down(i int) {
	for n := len(h.items); ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *swapHeap) set(x *item) {
	if x.t.Deadline == Never {
		h.remove(x)
		return
	}
	if x.t.index == 0 {
		h.items = append(h.items, x)
		x.t.index = len(h.items)
		h.up(x.t.index - 1)
		return
	}
	if !h.up(x.t.index - 1) {
		h.down(x.t.index - 1)
	}
}

func (h *swapHeap) remove(x *item) {
	i := x.t.index - 1
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	h.swap(i, last)
	h.items = h.items[:last]
	x.t.index = 0
	if i < last && !h.up(i) {
		h.down(i)
	}
}

// TestTimerHeapLayoutAsSwaps checks that TimerHeap places every object
// exactly where the swap-based heap did, through random sets, moves,
// removals and pops with many equal deadlines: the order in which equal
// deadlines fall due (which the endpoints' OnTimer follows) is unchanged.
func TestTimerHeapLayoutAsSwaps(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(7, 8))
	h := NewTimerHeap(func(x *item) *Timer { return &x.t })
	var ref swapHeap
	xs, ys := make([]*item, n), make([]*item, n)
	for i := range xs {
		xs[i], ys[i] = &item{id: i}, &item{id: i}
	}
	for step := 0; step < 20000; step++ {
		i := rng.IntN(n)
		switch r := rng.IntN(10); {
		case r == 0:
			h.Remove(xs[i])
			ref.remove(ys[i])
		case r == 1 && h.Len() > 0:
			x, y := h.PopMin(), ref.items[0]
			ref.remove(y)
			require.Equal(t, y.id, x.id, "step %d: popped", step)
		case r == 2:
			d := Never
			xs[i].t.Deadline, ys[i].t.Deadline = d, d
			h.Set(xs[i])
			ref.set(ys[i])
		default:
			d := rng.Int64N(20) // few distinct deadlines: many ties
			if r == 3 {
				d = xs[i].t.Deadline // unchanged (or Never: not queued)
			}
			xs[i].t.Deadline, ys[i].t.Deadline = d, d
			h.Set(xs[i])
			ref.set(ys[i])
		}
		require.Equal(t, len(ref.items), h.Len())
		for k, y := range ref.items {
			require.Equal(t, y.id, h.items[k].id, "step %d: position %d", step, k)
			require.Equal(t, y.t.Deadline, h.keys[k])
			require.Equal(t, k+1, h.items[k].t.index)
		}
	}
}
