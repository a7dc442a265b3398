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
type TimerHeap[T comparable] struct {
	items []T
	timer func(T) *Timer
}

// NewTimerHeap returns an empty heap; timer finds an object's Timer.
func NewTimerHeap[T comparable](timer func(T) *Timer) TimerHeap[T] {
	return TimerHeap[T]{timer: timer}
}

// Len is the number of queued objects.
func (h *TimerHeap[T]) Len() int { return len(h.items) }

// Min is the earliest deadline (the heap must not be empty).
func (h *TimerHeap[T]) Min() int64 { return h.timer(h.items[0]).Deadline }

// Set queues, moves or (for a Never deadline) removes x after its
// deadline changed.
func (h *TimerHeap[T]) Set(x T) {
	t := h.timer(x)
	if t.Deadline == Never {
		h.Remove(x)
		return
	}
	if t.index == 0 {
		h.items = append(h.items, x)
		t.index = len(h.items)
		h.up(t.index - 1)
		return
	}
	if !h.up(t.index - 1) {
		h.down(t.index - 1)
	}
}

// Remove takes x out of the heap if it is queued.
func (h *TimerHeap[T]) Remove(x T) {
	i := h.timer(x).index - 1
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	h.swap(i, last)
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	h.timer(x).index = 0
	if i < last && !h.up(i) {
		h.down(i)
	}
}

// PopMin removes and returns the object with the earliest deadline.
func (h *TimerHeap[T]) PopMin() T {
	x := h.items[0]
	h.Remove(x)
	return x
}

func (h *TimerHeap[T]) less(i, j int) bool {
	return h.timer(h.items[i]).Deadline < h.timer(h.items[j]).Deadline
}

func (h *TimerHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.timer(h.items[i]).index = i + 1
	h.timer(h.items[j]).index = j + 1
}

func (h *TimerHeap[T]) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (h *TimerHeap[T]) down(i int) {
	n := len(h.items)
	for {
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
