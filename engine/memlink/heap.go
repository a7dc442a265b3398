package memlink

// flight is one packet in flight: a copy of its bytes owned by the link
// (taken from the buffer pool), its destination and when it is due.
type flight struct {
	at  int64  // delivery time, ns
	seq uint64 // insertion order; breaks ties in at deterministically
	buf []byte // owned by the link until delivered, then recycled
	key PathKey
	to  Side
}

// before orders flights by (delivery time, insertion sequence). seq is
// unique, so the order is total and the delivery order never depends on
// heap internals.
func (f *flight) before(g *flight) bool {
	if f.at != g.at {
		return f.at < g.at
	}
	return f.seq < g.seq
}

// flightHeap is a binary min-heap of flights ordered by before. It is
// hand-written rather than built on container/heap so that push and pop
// move values without boxing them in interfaces, keeping Send and Deliver
// free of allocations once the backing array has grown.
type flightHeap []flight

func (h flightHeap) len() int { return len(h) }

// peek returns the earliest flight; the heap must not be empty.
func (h flightHeap) peek() *flight { return &h[0] }

func (h *flightHeap) push(f flight) {
	*h = append(*h, f)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].before(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the earliest flight; the heap must not be empty.
func (h *flightHeap) pop() flight {
	s := *h
	n := len(s) - 1
	top := s[0]
	s[0] = s[n]
	s[n] = flight{} // drop the buffer reference from the unused tail
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].before(&s[l]) {
			m = r
		}
		if !s[m].before(&s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
