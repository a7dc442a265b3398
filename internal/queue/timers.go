package queue

import "math"

// Never is a deadline that never arrives: a Timer set to it is not queued.
const Never int64 = math.MaxInt64

// Timer is the part of an object that a TimerHeap orders: its deadline and
// its position in the heap. Embed one and give the heap a way to find it.
type Timer struct {
	Deadline int64
	index    int // position in the heap + 1; 0 = not queued
}

// TimerHeap is a binary min-heap of objects ordered by their Timer's
// deadline, so the earliest is found in O(1) and one is moved in O(log n)
// even with thousands of objects. Each object records its own position.
//
// The heap keeps each queued object's deadline beside it (keys), so a
// sift compares without loading the objects (with thousands of
// connections, a cache miss each), and a Set that leaves the deadline as it
// was costs nothing: every packet of a busy connection resets its timer,
// mostly to the same time. Sifting moves the hole, not the object, and
// makes exactly the moves pairwise swaps would make, so equal deadlines
// come out in the same order as they always did.
type TimerHeap[T comparable] struct {
	items []T
	keys  []int64 // keys[i] is items[i]'s deadline as queued
	timer func(T) *Timer
}

// NewTimerHeap returns an empty heap; timer finds an object's Timer.
func NewTimerHeap[T comparable](timer func(T) *Timer) TimerHeap[T] {
	return TimerHeap[T]{timer: timer}
}

// Len is the number of queued objects.
func (h *TimerHeap[T]) Len() int { return len(h.items) }

// Min is the earliest deadline (the heap must not be empty).
func (h *TimerHeap[T]) Min() int64 { return h.keys[0] }

// Set queues, moves or (for a Never deadline) removes x after its
// deadline changed.
func (h *TimerHeap[T]) Set(x T) {
	t := h.timer(x)
	if t.Deadline == Never {
		h.Remove(x)
		return
	}
	if t.index == 0 {
		var zero T
		h.items = append(h.items, zero)
		h.keys = append(h.keys, 0)
		h.up(len(h.items)-1, x, t)
		return
	}
	i := t.index - 1
	if h.keys[i] == t.Deadline {
		return // where it is: neither sift would move it
	}
	h.fix(i, x, t)
}

// Remove takes x out of the heap if it is queued.
func (h *TimerHeap[T]) Remove(x T) {
	t := h.timer(x)
	i := t.index - 1
	if i < 0 {
		return
	}
	t.index = 0
	last := len(h.items) - 1
	y := h.items[last]
	var zero T
	h.items[last] = zero
	h.items, h.keys = h.items[:last], h.keys[:last]
	if i < last {
		h.fix(i, y, h.timer(y))
	}
}

// PopMin removes and returns the object with the earliest deadline.
func (h *TimerHeap[T]) PopMin() T {
	x := h.items[0]
	h.Remove(x)
	return x
}

// fix puts x (with Timer t) into hole i, above it when its deadline is
// earlier than the parent's, else at or below it.
func (h *TimerHeap[T]) fix(i int, x T, t *Timer) {
	if i > 0 && t.Deadline < h.keys[(i-1)/2] {
		h.up(i, x, t)
	} else {
		h.down(i, x, t)
	}
}

// place puts x (with Timer t) at position i.
func (h *TimerHeap[T]) place(i int, x T, t *Timer) {
	h.items[i], h.keys[i] = x, t.Deadline
	t.index = i + 1
}

// move puts the object at position from at position to.
func (h *TimerHeap[T]) move(to, from int) {
	h.items[to], h.keys[to] = h.items[from], h.keys[from]
	h.timer(h.items[to]).index = to + 1
}

func (h *TimerHeap[T]) up(i int, x T, t *Timer) {
	for i > 0 {
		p := (i - 1) / 2
		if t.Deadline >= h.keys[p] {
			break
		}
		h.move(i, p)
		i = p
	}
	h.place(i, x, t)
}

func (h *TimerHeap[T]) down(i int, x T, t *Timer) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.keys[r] < h.keys[l] {
			m = r
		}
		if h.keys[m] >= t.Deadline {
			break
		}
		h.move(i, m)
		i = m
	}
	h.place(i, x, t)
}
