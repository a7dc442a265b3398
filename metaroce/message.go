package metaroce

import "github.com/metaroce/metaroce/verbs"

// txMsg is a work request on its way out: a WRITE, SEND or READ request of
// one queue pair. It is pooled per connection; it returns to the pool once
// its completion is reported and no path slot refers to it any more.
type txMsg struct {
	op         Opcode
	qp         *QueuePair
	wrID       uint64
	seq        MsgSeq
	recvSeq    MsgSeq
	mr         *verbs.MemoryRegion
	local      []byte
	length     uint32
	remoteAddr uint64
	rkey       verbs.RKey
	imm        uint32

	nChunks     int    // packets of one attempt (READ: response packets)
	segOff      uint32 // next payload offset to send in this attempt
	segDone     bool   // every packet of this attempt has been built
	ackedChunks int    // packets of this attempt acknowledged (READ: the request)
	outstanding int    // path slots that refer to this message, any attempt
	attempt     uint16
	rnrTries    int

	placed chunkSet // READ: response chunks placed locally
	// acked: WRITE*, SEND*: chunks of this attempt acknowledged since a
	// first packet of it was moved (copied), when two copies of one chunk
	// may both be acknowledged; before that each chunk has one copy and
	// the set is not kept (the hot path does not touch it).
	acked chunkSet
	moved bool // a packet of this attempt was moved, keeping its original (acked is kept)

	finished  bool         // outcome known; waiting for in-order completion
	completed bool         // completion reported
	status    verbs.Status // outcome
}

// readJob is the responder's side of a READ: the response packets it owes
// the requester. It is queued on the connection until every packet has been
// built and lives until every packet is acknowledged.
type readJob struct {
	stream      StreamID
	seq         MsgSeq
	mr          *verbs.MemoryRegion
	src         []byte
	nChunks     int
	segOff      uint32
	segDone     bool
	ackedChunks int
	outstanding int
}

// chunkSet records which MTU-sized chunks of a message have been placed, so
// a chunk that arrives twice (resent on another path, duplicated by the
// fabric) is counted once. Its storage is reused across messages.
type chunkSet struct {
	bits  []uint64
	n     int // chunks in the message
	count int // chunks set
}

func (c *chunkSet) reset(n int) {
	w := (n + 63) / 64
	if cap(c.bits) < w {
		c.bits = make([]uint64, w)
	} else {
		c.bits = c.bits[:w]
		clear(c.bits)
	}
	c.n, c.count = n, 0
}

// add marks chunk i and reports whether it was new.
func (c *chunkSet) add(i int) bool {
	w, b := i/64, uint(i%64)
	if c.bits[w]&(1<<b) != 0 {
		return false
	}
	c.bits[w] |= 1 << b
	c.count++
	return true
}

func (c *chunkSet) full() bool { return c.count == c.n }

// has reports whether chunk i is marked.
func (c *chunkSet) has(i int) bool { return c.bits[i/64]&(1<<uint(i%64)) != 0 }

// chunksFor returns the number of packets a message of length n needs with
// the given payload size (a zero-length message still sends one packet).
func chunksFor(n uint32, mtu int) int {
	if n == 0 {
		return 1
	}
	return int((uint64(n) + uint64(mtu) - 1) / uint64(mtu))
}

// chunkOf validates that a payload of plen bytes at off is exactly chunk
// off/mtu of a message of msgLen bytes, and returns that chunk's index.
func chunkOf(off uint32, plen int, msgLen uint32, mtu int) (int, bool) {
	if off%uint32(mtu) != 0 || off > msgLen {
		return 0, false
	}
	want := msgLen - off
	if want > uint32(mtu) {
		want = uint32(mtu)
	}
	if uint32(plen) != want || (msgLen > 0 && off == msgLen) {
		return 0, false
	}
	return int(off / uint32(mtu)), true
}

// recvSlot is a posted receive and the message landing in it.
type recvSlot struct {
	wrID    uint64
	mr      *verbs.MemoryRegion
	buf     []byte
	started bool // first packet seen: length known and checked
	msgLen  uint32
	imm     uint32
	hasImm  bool
	opcode  verbs.WCOpcode
	status  verbs.Status // the receive's completion status
	wire    verbs.Status // the status NAKed to the sender, when status is an error
	done    bool
}

// errorRecord remembers how a retired receive-consuming message ended, so a
// late resend of one of its packets gets the same answer.
type errorRecord struct {
	stream  StreamID
	recvSeq MsgSeq
	status  verbs.Status
	valid   bool
}

// errorHistoryLen bounds the per-connection error history.
const errorHistoryLen = 64
