package rocev2

// ring is a growable FIFO whose storage is reused, so steady-state pushes
// and pops allocate nothing once it has grown to the working size.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

// at returns element i counted from the front (0 = oldest).
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

func (r *ring[T]) front() *T { return &r.buf[r.head] }

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// popBack removes and returns the newest element.
func (r *ring[T]) popBack() T {
	var zero T
	p := r.at(r.n - 1)
	v := *p
	*p = zero
	r.n--
	return v
}

func (r *ring[T]) grow() {
	n := len(r.buf) * 2
	if n == 0 {
		n = 8
	}
	b := make([]T, n)
	for i := 0; i < r.n; i++ {
		b[i] = *r.at(i)
	}
	r.buf, r.head = b, 0
}

func (r *ring[T]) clear() {
	for r.n > 0 {
		r.pop()
	}
}
