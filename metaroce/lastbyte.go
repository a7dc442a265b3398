package metaroce

import "github.com/metaroce/metaroce/verbs"

// maxHeldChunks bounds the WRITE last chunks one connection holds back at
// a time (placeWrite); one beyond it is not acknowledged, so the sender
// resends it, by when the rest of its message has likely landed.
const maxHeldChunks = 1024

// placeWrite places a fresh chunk of WRITE or WRITE_IMM message seq. The
// chunk that carries the message's last byte is placed last, as on an
// InfiniBand responder executing in order, so a program that polls the
// last byte of a WRITE (as perftest's ib_write_lat does) sees the whole
// message: arriving before the rest, it is acknowledged but kept aside
// (at most one per message), and copied once the other chunks have all
// been placed. It reports false when the chunk can be neither placed nor
// held (maxHeldChunks): the window forgets it and the packet is not
// acknowledged.
func (c *Conn) placeWrite(q *QueuePair, seq MsgSeq, chunk int, mr *verbs.MemoryRegion, dst, payload []byte) bool {
	e, _ := q.rxw.entry(seq) // admit has just marked chunk: e is in the window
	if chunk == e.n-1 && !e.done {
		if c.heldN >= maxHeldChunks {
			e.unmark(chunk)
			c.c.LastChunksRefused++
			return false
		}
		c.heldN++
		c.c.LastChunksHeld++
		e.held = append(c.heldBuf(), payload...)
		e.heldDst, e.heldMR = dst, mr
		return true
	}
	copy(dst, payload)
	c.c.PayloadPlaced += uint64(len(payload))
	if e.done && e.heldMR != nil {
		// The rest has landed: the last byte goes in now.
		if e.heldMR.Placeable() { // else deregistered meanwhile: nothing lands in it
			copy(e.heldDst, e.held)
			c.c.PayloadPlaced += uint64(len(e.held))
		}
		c.dropHeld(e)
	}
	return true
}

// heldBuf returns an empty buffer for a held chunk, reusing a pooled one.
func (c *Conn) heldBuf() []byte {
	if n := len(c.heldPool); n > 0 {
		b := c.heldPool[n-1]
		c.heldPool = c.heldPool[:n-1]
		return b[:0]
	}
	return make([]byte, 0, c.mtu)
}

// dropHeld returns e's held chunk buffer to the pool, if it has one.
func (c *Conn) dropHeld(e *rxMsg) {
	if e.heldMR == nil {
		return
	}
	c.heldPool = append(c.heldPool, e.held)
	c.heldN--
	e.held, e.heldDst, e.heldMR = nil, nil, nil
}
