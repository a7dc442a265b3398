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
func (c *Conn) placeWrite(e *rxMsg, chunk int, mr *verbs.MemoryRegion, dst, payload []byte) bool {
	if int32(chunk) == e.n-1 && !e.done {
		if c.heldN >= maxHeldChunks {
			e.unmark(chunk)
			c.c.LastChunksRefused++
			return false
		}
		c.heldN++
		c.c.LastChunksHeld++
		h := c.newHeld()
		h.buf = append(h.buf[:0], payload...)
		h.dst, h.mr = dst, mr
		e.held = h
		return true
	}
	copy(dst, payload)
	c.c.PayloadPlaced += uint64(len(payload))
	if h := e.held; e.done && h != nil {
		// The rest has landed: the last byte goes in now.
		if h.mr.Placeable() { // else deregistered meanwhile: nothing lands in it
			copy(h.dst, h.buf)
			c.c.PayloadPlaced += uint64(len(h.buf))
		}
		c.dropHeld(e)
	}
	return true
}

// heldChunk is a WRITE's last chunk kept aside: its payload, where it
// goes, and the region that holds it. Pooled per connection.
type heldChunk struct {
	buf []byte
	dst []byte
	mr  *verbs.MemoryRegion
}

func (c *Conn) newHeld() *heldChunk {
	if n := len(c.heldPool); n > 0 {
		h := c.heldPool[n-1]
		c.heldPool = c.heldPool[:n-1]
		return h
	}
	return &heldChunk{buf: make([]byte, 0, c.mtu)}
}

// dropHeld returns e's held chunk to the pool, if it has one.
func (c *Conn) dropHeld(e *rxMsg) {
	h := e.held
	if h == nil {
		return
	}
	h.dst, h.mr = nil, nil
	c.heldPool = append(c.heldPool, h)
	c.heldN--
	e.held = nil
}
