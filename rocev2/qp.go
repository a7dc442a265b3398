package rocev2

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/internal/cqhook"
	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

// pushWC reports a completion into a verbs completion queue (see
// internal/cqhook: only transport cores can).
var pushWC = cqhook.Push[verbs.PushFunc]()

// Errors of the queue-pair API.
var (
	ErrQueueFull = errors.New("rocev2: work queue full")
	ErrNotUsable = errors.New("rocev2: QP is closed")
	ErrQPError   = errors.New("rocev2: QP is in the error state")
	ErrQPExists  = errors.New("rocev2: connection already has its queue pair")
	ErrNoQP      = errors.New("rocev2: CreateQP has not been called")
	ErrTooLarge  = errors.New("rocev2: message longer than 2 GiB")
)

// MaxMessageLen is the largest message (IBA: 2^31 bytes).
const MaxMessageLen = 1 << 31

// QueuePair is the RC queue pair of a Conn (one per connection).
type QueuePair struct {
	conn   *Conn
	pd     *verbs.ProtectionDomain
	sendCQ *verbs.CompletionQueue
	recvCQ *verbs.CompletionQueue
	rq     queue.Ring[recvSlot]
	// destroyed: Destroy closed the connection (posts say so, not just
	// "closed").
	destroyed bool
}

// wqe is a send work request on its way out. Its PSNs are assigned when the
// requester first reaches it, since the path MTU is known only once the
// connection is up.
type wqe struct {
	id       uint64
	op       verbs.WROpcode
	mr       *verbs.MemoryRegion
	local    []byte
	length   uint32
	raddr    uint64
	rkey     uint32
	imm      uint32
	first    PSN
	npkts    int // PSNs the message occupies (READ: response packets)
	reqStart int // READ: packet index the latest request started at
}

// recvSlot is a posted receive.
type recvSlot struct {
	id  uint64
	mr  *verbs.MemoryRegion
	buf []byte
}

// Conn is the queue pair's connection.
func (q *QueuePair) Conn() *Conn { return q.conn }

// QPN is the queue pair's number.
func (q *QueuePair) QPN() verbs.QPN { return verbs.QPN(q.conn.qpn) }

// OutstandingSends is the number of send work requests not yet completed.
func (q *QueuePair) OutstandingSends() int { return q.conn.sq.Len() }

// PostedRecvs is the number of receives not yet completed.
func (q *QueuePair) PostedRecvs() int { return q.rq.Len() }

// PostSend queues a WRITE, SEND or READ (ibv_post_send). The local buffer
// is checked now; remote checks happen at the responder and come back as
// an error completion. The buffer belongs to the endpoint until the
// completion is polled.
func (q *QueuePair) PostSend(now verbs.Time, wr verbs.SendWR) error {
	c := q.conn
	if err := q.usable(); err != nil {
		return err
	}
	if c.sq.Len() >= c.ep.cfg.SendQueueDepth {
		return ErrQueueFull
	}
	need := verbs.Access(0)
	switch wr.Opcode {
	case verbs.WRWrite, verbs.WRWriteImm, verbs.WRSend, verbs.WRSendImm:
	case verbs.WRRead:
		need = verbs.AccessLocalWrite
	default:
		return fmt.Errorf("rocev2: unknown work request opcode %d", wr.Opcode)
	}
	if uint64(wr.Local.Length) > MaxMessageLen {
		return ErrTooLarge
	}
	var m *verbs.MemoryRegion
	var local []byte
	if wr.Local.Length > 0 {
		var ok bool
		m, local, ok = c.ep.regions.ResolveLocal(q.pd, wr.Local, need)
		if !ok {
			return verbs.ErrBadSGE
		}
	}
	w := c.newWQE()
	*w = wqe{id: wr.ID, op: wr.Opcode, mr: m, local: local, length: wr.Local.Length,
		raddr: wr.RemoteAddr, rkey: uint32(wr.RKey), imm: wr.Imm}
	c.sq.Push(w)
	c.ep.touch(c, now)
	return nil
}

// PostRecv queues a receive buffer (ibv_post_recv). SENDs and WRITEs with
// immediate consume receives in posting order.
func (q *QueuePair) PostRecv(now verbs.Time, wr verbs.RecvWR) error {
	c := q.conn
	if err := q.usable(); err != nil {
		return err
	}
	if q.rq.Len() >= c.ep.cfg.RecvQueueDepth {
		return ErrQueueFull
	}
	var m *verbs.MemoryRegion
	var buf []byte
	if wr.Local.Length > 0 {
		var ok bool
		m, buf, ok = c.ep.regions.ResolveLocal(q.pd, wr.Local, verbs.AccessLocalWrite)
		if !ok {
			return verbs.ErrBadSGE
		}
	}
	q.rq.Push(recvSlot{id: wr.ID, mr: m, buf: buf})
	return nil
}

func (q *QueuePair) usable() error {
	switch {
	case q.destroyed:
		return verbs.ErrQPDestroyed
	case q.conn.state == stateError:
		return ErrQPError
	case q.conn.state >= stateClosed:
		return ErrNotUsable
	case q.pd == nil:
		return ErrNoQP
	}
	return nil
}

func (c *Conn) newWQE() *wqe {
	if n := len(c.wqePool); n > 0 {
		w := c.wqePool[n-1]
		c.wqePool = c.wqePool[:n-1]
		return w
	}
	return &wqe{}
}

// completeSend reports a finished send work request and recycles it.
func (c *Conn) completeSend(w *wqe, st verbs.Status) {
	st = verbs.FailIfRevoked(w.mr, st)
	wc := verbs.WorkCompletion{WRID: w.id, Status: st, QPN: verbs.QPN(c.qpn)}
	switch w.op {
	case verbs.WRSend, verbs.WRSendImm:
		wc.Opcode = verbs.WCSend
	case verbs.WRWrite, verbs.WRWriteImm:
		wc.Opcode = verbs.WCWrite
	case verbs.WRRead:
		wc.Opcode = verbs.WCRead
	}
	if st == verbs.StatusSuccess {
		wc.ByteLen = w.length
		c.c.MessagesSent++
	}
	if c.qp.sendCQ != nil {
		pushWC(c.qp.sendCQ, wc)
	}
	*w = wqe{}
	c.wqePool = append(c.wqePool, w)
}

// completeRecv reports a finished receive.
func (c *Conn) completeRecv(s *recvSlot, st verbs.Status, n uint32, op verbs.WCOpcode, imm uint32, hasImm bool) {
	st = verbs.FailIfRevoked(s.mr, st)
	wc := verbs.WorkCompletion{WRID: s.id, Status: st, Opcode: op, Imm: imm, HasImm: hasImm, QPN: verbs.QPN(c.qpn)}
	if st == verbs.StatusSuccess {
		wc.ByteLen = n
		c.c.MessagesReceived++
	}
	if c.qp.recvCQ != nil {
		pushWC(c.qp.recvCQ, wc)
	}
}
