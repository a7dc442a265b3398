package memlink

// minBufCap is the smallest buffer the pool hands out: large enough for a
// standard 1500-byte MTU frame, so that packets of mixed sizes up to that
// reuse each other's buffers.
const minBufCap = 2048

// bufPool is a free list of packet buffers. The link copies every sent
// packet into a pooled buffer and returns it after delivery, so that in
// steady state Send and Deliver allocate nothing. Unlike sync.Pool it is
// deterministic and never emptied by the garbage collector; it needs no
// locking because a Link belongs to one goroutine.
type bufPool struct {
	free [][]byte
}

// get returns a buffer of length n. Its contents are undefined.
func (p *bufPool) get(n int) []byte {
	if k := len(p.free); k > 0 {
		b := p.free[k-1]
		if cap(b) >= n {
			p.free[k-1] = nil
			p.free = p.free[:k-1]
			return b[:n]
		}
		// Too small for this packet: leave it for a smaller one.
	}
	return make([]byte, n, max(n, minBufCap))
}

// put returns b to the free list. The caller must not use b afterwards.
func (p *bufPool) put(b []byte) {
	p.free = append(p.free, b[:0])
}
