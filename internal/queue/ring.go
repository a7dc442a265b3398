package queue

// Ring is a growable FIFO. Its storage is reused, so steady-state pushes
// and pops allocate nothing once it has grown to the working size. The
// zero value is an empty ring.
type Ring[T any] struct {
	buf  []T
	head int
	n    int
}

// NewRing returns a ring with room for at least n elements before it grows.
func NewRing[T any](n int) Ring[T] {
	size := 8
	for size < n {
		size <<= 1
	}
	return Ring[T]{buf: make([]T, size)}
}

// Len is the number of elements.
func (r *Ring[T]) Len() int { return r.n }

// At returns element i counted from the front (0 = oldest).
func (r *Ring[T]) At(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// Front returns the oldest element.
func (r *Ring[T]) Front() *T { return &r.buf[r.head] }

// Push appends v.
func (r *Ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// Pop removes and returns the oldest element, clearing its slot.
func (r *Ring[T]) Pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// PopBack removes and returns the newest element, clearing its slot.
func (r *Ring[T]) PopBack() T {
	var zero T
	p := r.At(r.n - 1)
	v := *p
	*p = zero
	r.n--
	return v
}

// Extend appends an element and returns it without clearing it, so the
// caller can reuse storage the element held the last time round.
func (r *Ring[T]) Extend() *T {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.n++
	return r.At(r.n - 1)
}

// Drop removes the oldest element without clearing it (see Extend).
func (r *Ring[T]) Drop() {
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
}

// Clear removes every element.
func (r *Ring[T]) Clear() {
	for r.n > 0 {
		r.Pop()
	}
}

func (r *Ring[T]) grow() {
	n := len(r.buf) * 2
	if n == 0 {
		n = 8
	}
	b := make([]T, n)
	for i := 0; i < r.n; i++ {
		b[i] = *r.At(i)
	}
	r.buf, r.head = b, 0
}
