package metaroce

import "github.com/metaroce/metaroce/verbs"

// MsgWindow is how far ahead of the oldest message it has not completed a
// sender may send on one stream, in messages: the sender segments message
// msg_seq only while msg_seq − (oldest uncompleted msg_seq) < MsgWindow,
// and the responder tracks exactly that many messages per stream
// (rxWindow). It equals the default send queue depth, so a default
// configuration never waits on it.
const MsgWindow = 4096

// maxWindowWords bounds the chunk-set storage (64-bit words) one
// connection's responder windows hold, whatever its peer sends: a message
// whose chunk set would not fit is answered receiver-not-ready.
const maxWindowWords = 1 << 20

// rxWindow is a stream's responder-side record of the messages the peer
// has in flight on it, keyed by msg_seq: every message below base is done
// (placed, or failed with a NAK), and for each message in
// [base, base+MsgWindow) the chunks placed so far. It gives the responder
// two things:
//
//   - Exactly-once placement. A chunk is copied to memory only the first
//     time it arrives: a copy of an already-placed chunk that comes on a
//     new PSN (moved off a timed-out or failed path, or resent after an
//     RNR restart) is acknowledged but not placed again, so no byte of a
//     message is written after the message is done.
//   - InfiniBand RC ordering per stream. The receive of a SEND, SEND_IMM or
//     WRITE_IMM completes only once base passes it, that is once every
//     earlier message of the stream is done; a READ is served (its readJob
//     starts) only once base reaches it, so it reads what every earlier
//     WRITE wrote. Chunks of all messages are still placed as they arrive.
//
// How each way a message ends at the sender moves the window:
//
//   - Success: the sender completes a message only when every chunk is
//     acknowledged, and the responder acknowledges a chunk only after
//     setting it here, so the entry is full (done) first; base passes it
//     once every earlier message is done too.
//   - NAK'd error (access, length, invalid request): the responder marks
//     the entry failed when it sends the NAK (Conn.nak), so it is done.
//     Late copies are validated again and get the same NAK; nothing of
//     theirs is placed.
//   - RNR restart (a new attempt): nothing changes; the new attempt's
//     packets fill the same entry, chunks already set are not copied again
//     (they carry the same bytes).
//   - A packet beyond the window (msg_seq ≥ base+MsgWindow, which a
//     sender keeping to MsgWindow never sends) is answered RNR: the sender
//     retries, nothing is placed.
//   - RNR retries exceeded, the local source deregistered mid-send, or the
//     sender's queue pair destroyed (Conn.breakStream): the sender flushes
//     the message and every later one and sends nothing new on the stream,
//     so the window cannot grow past what is already in it. Base stays at
//     the abandoned message: no later receive of the stream completes
//     (as on an InfiniBand RC responder, whose requester stopped) and no
//     later READ is served; late copies of chunks already set are not
//     placed again. The window is torn down when this end's queue pair is
//     destroyed or the connection ends.
//   - This end's queue pair destroyed (QueuePair.Destroy) or the connection
//     aborted, closed or failed: the window is torn down (rxWindow.clear);
//     deferred READs are dropped.
type rxWindow struct {
	base MsgSeq
	ents []rxMsg // ring, grown by doubling up to MsgWindow; index seq & (len−1)
}

// rxMsg is one in-window message.
type rxMsg struct {
	used    bool // the message's first packet (or its NAK) was seen
	done    bool // placed in full, or failed
	failed  bool
	recv    bool   // receive-consuming (SEND*, WRITE_IMM): complete its receive when base passes
	recvSeq MsgSeq // its receive
	msgLen  uint32
	n       int32      // chunks in the message
	count   int32      // chunks placed
	lo      uint64     // chunks 0..63 placed: most messages need no more
	hi      []uint64   // chunks from 64 on (storage kept when small)
	job     *readJob   // READ: deferred until base reaches it
	held    *heldChunk // a WRITE's last chunk, arrived before the rest (placeWrite)
}

// add marks chunk i and reports whether it was new.
func (e *rxMsg) add(i int) bool {
	w, b := &e.lo, uint(i%64)
	if i >= 64 {
		w = &e.hi[i/64-1]
	}
	if *w&(1<<b) != 0 {
		return false
	}
	*w |= 1 << b
	e.count++
	return true
}

// unmark forgets chunk i (placeWrite could not take it).
func (e *rxMsg) unmark(i int) {
	w := &e.lo
	if i >= 64 {
		w = &e.hi[i/64-1]
	}
	*w &^= 1 << uint(i%64)
	e.count--
}

// winVerdict is what the window says of a chunk.
type winVerdict uint8

const (
	winFresh    winVerdict = iota // new chunk: place it
	winDup                        // already placed (or its message done): acknowledge, do not place
	winBeyond                     // outside the window or over the storage budget: refuse (RNR)
	winMismatch                   // contradicts the message's first packet: drop
)

// entry returns the entry of seq, growing the ring when needed; nil when
// seq is below base (done) or beyond the window.
func (w *rxWindow) entry(seq MsgSeq) (*rxMsg, winVerdict) {
	d := int32(seq - w.base)
	if d < 0 {
		return nil, winDup
	}
	if d >= MsgWindow {
		return nil, winBeyond
	}
	if int(d) >= len(w.ents) {
		w.grow(int(d) + 1)
	}
	return &w.ents[uint32(seq)&uint32(len(w.ents)-1)], winFresh
}

// grow makes the ring hold at least n messages from base (allocates: only
// when a stream's in-flight messages reach a new high).
func (w *rxWindow) grow(n int) {
	size := max(len(w.ents), 8)
	for size < n {
		size <<= 1
	}
	ents := make([]rxMsg, size)
	for k := range len(w.ents) {
		seq := uint32(w.base) + uint32(k)
		ents[seq&uint32(size-1)] = w.ents[seq&uint32(len(w.ents)-1)]
	}
	w.ents = ents
}

// admit checks chunk of message seq (length msgLen) against the window
// and, if it is fresh, marks it placed, returning the message's entry
// (nil unless fresh). The caller places a fresh chunk's payload; it must
// have validated the packet first.
func (c *Conn) admit(w *rxWindow, seq MsgSeq, msgLen uint32, chunk int) (*rxMsg, winVerdict) {
	e, v := w.entry(seq)
	if e == nil {
		return nil, v
	}
	if !e.used {
		n := chunksFor(msgLen, c.mtu)
		words := (n+63)/64 - 1
		if grow := words - cap(e.hi); grow > 0 {
			if c.winWords+grow > maxWindowWords {
				return nil, winBeyond
			}
			c.winWords += grow
			e.hi = make([]uint64, words)
		} else {
			e.hi = e.hi[:words]
			clear(e.hi)
		}
		e.used, e.msgLen, e.n, e.count, e.lo = true, msgLen, int32(n), 0, 0
	} else if e.done {
		return nil, winDup
	} else if e.msgLen != msgLen {
		return nil, winMismatch
	}
	if !e.add(chunk) {
		return nil, winDup
	}
	if e.count == e.n {
		e.done = true
	}
	return e, winFresh
}

// bindRecv records that message seq consumes receive recvSeq.
func (w *rxWindow) bindRecv(seq, recvSeq MsgSeq) {
	if e, _ := w.entry(seq); e != nil {
		e.recv, e.recvSeq = true, recvSeq
	}
}

// fail marks message seq done with an error (it was NAK'd).
func (c *Conn) winFail(q *QueuePair, seq MsgSeq) {
	e, _ := q.rxw.entry(seq)
	if e == nil || e.done {
		return
	}
	e.used, e.done, e.failed = true, true, true
	c.dropHeld(e)
	if e.job != nil {
		c.dropJob(e.job)
		e.job = nil
	}
}

// advance moves base past every done message at its front, completing
// their receives and starting the READ it reaches.
func (c *Conn) advance(q *QueuePair) {
	w := &q.rxw
	completed := false
	for len(w.ents) > 0 {
		e := &w.ents[uint32(w.base)&uint32(len(w.ents)-1)]
		if e.used && e.job != nil {
			// Every earlier message is done: the READ reads what they wrote.
			c.deferredJobs--
			c.jobs.Push(e.job)
			e.job, e.done = nil, true
		}
		if !e.used || !e.done {
			break
		}
		if e.recv && !e.failed {
			if d := int32(e.recvSeq - q.rqBase); d >= 0 && int(d) < q.rq.Len() {
				if s := q.rq.At(int(d)); !s.done {
					s.done, s.status = true, verbs.StatusSuccess
					completed = true
				}
			}
		}
		c.retireEntry(e)
		w.base++
	}
	if completed {
		q.completeRecvs()
	}
}

// retireEntry empties e for reuse, keeping small chunk sets' storage.
func (c *Conn) retireEntry(e *rxMsg) {
	c.dropHeld(e)
	hi := e.hi
	if cap(hi) > 64 {
		c.winWords -= cap(hi)
		hi = nil
	}
	*e = rxMsg{hi: hi[:0]}
}

// clearWindow tears q's window down (its queue pair destroyed, or the
// connection gone): deferred READs are dropped, storage released.
func (c *Conn) clearWindow(q *QueuePair) {
	w := &q.rxw
	for i := range w.ents {
		e := &w.ents[i]
		if e.job != nil {
			c.dropJob(e.job)
		}
		c.dropHeld(e)
		c.winWords -= cap(e.hi)
	}
	*w = rxWindow{base: w.base}
}

// dropJob releases a READ response that never started.
func (c *Conn) dropJob(j *readJob) {
	c.deferredJobs--
	c.releaseJobRefs(j)
	*j = readJob{}
	c.jobPool = append(c.jobPool, j)
}
