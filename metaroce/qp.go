package metaroce

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

// Errors of the queue-pair API.
var (
	ErrQueueFull   = errors.New("metaroce: work queue full")
	ErrNotUsable   = errors.New("metaroce: connection is closed or failed")
	ErrStreamInUse = errors.New("metaroce: stream already has a queue pair")
	ErrTooLarge    = errors.New("metaroce: message longer than 4 GiB - 1")
	ErrStreamError = errors.New("metaroce: stream is in the error state")
)

// QueuePair is one ordered stream of a connection (a verbs QP). Many queue
// pairs share the connection's paths and congestion state; each costs only
// this record and its work queues.
type QueuePair struct {
	conn   *Conn
	id     StreamID
	qpn    verbs.QPN
	pd     *verbs.ProtectionDomain
	sendCQ *verbs.CompletionQueue
	recvCQ *verbs.CompletionQueue

	sq           queue.Ring[*txMsg] // posted, not yet completed, in posting order
	sqBase       MsgSeq             // msg_seq of sq's front
	segIdx       int                // index in sq of the message being segmented
	nextSeq      MsgSeq
	nextRecvSeq  MsgSeq
	blockedUntil verbs.Time // RNR back-off of the message being segmented
	active       bool       // in the connection's round robin of streams with data
	broken       bool       // send side in the error state (see Conn.breakStream)
	destroyed    bool       // Destroy was called: the stream is closed at this end
	agg          streamAgg  // the stream's entry in Conn.agg while active

	rq     queue.Ring[recvSlot]
	rqBase MsgSeq // recv_seq of rq's front

	rxw rxWindow // the peer's messages on this stream, as responder

	timers qpTimers // per-QP budgets, if given (qptimers.go)
}

// ID is the stream id, equal on both ends of the connection.
func (q *QueuePair) ID() StreamID { return q.id }

// QPN is the queue pair's number at this endpoint (its completions carry
// it). The endpoint numbers queue pairs from 1 in creation order; the
// peer's queue pair of the same stream has its own number.
func (q *QueuePair) QPN() verbs.QPN { return q.qpn }

// Conn is the connection the queue pair belongs to.
func (q *QueuePair) Conn() *Conn { return q.conn }

// PostSend queues a WRITE, SEND or READ (ibv_post_send). The local buffer
// is checked now; remote checks happen at the peer, and their failure comes
// back as an error completion. The buffer belongs to the endpoint until the
// completion is polled.
func (q *QueuePair) PostSend(now verbs.Time, wr verbs.SendWR) error {
	c := q.conn
	if q.destroyed {
		return verbs.ErrQPDestroyed
	}
	if c.state >= connClosing {
		return ErrNotUsable
	}
	if q.broken {
		return ErrStreamError
	}
	if q.sq.Len() >= c.ep.cfg.SendQueueDepth {
		return ErrQueueFull
	}
	var op Opcode
	need := verbs.Access(0)
	switch wr.Opcode {
	case verbs.WRWrite:
		op = OpWrite
	case verbs.WRWriteImm:
		op = OpWriteImm
	case verbs.WRSend:
		op = OpSend
	case verbs.WRSendImm:
		op = OpSendImm
	case verbs.WRRead:
		op, need = OpReadReq, verbs.AccessLocalWrite
	default:
		return fmt.Errorf("metaroce: unknown work request opcode %d", wr.Opcode)
	}
	var mr *verbs.MemoryRegion
	var local []byte
	if wr.Local.Length > 0 {
		var ok bool
		mr, local, ok = c.ep.regions.ResolveLocal(q.pd, wr.Local, need)
		if !ok {
			return verbs.ErrBadSGE
		}
	}
	m := c.newMsg()
	// Cleared, then set field by field (keeping the recycled bitmaps): a
	// composite literal that reads *m would be built on the stack and
	// copied with wide loads that stall on its narrow stores, once per
	// work request.
	placed, acked := m.placed, m.acked
	*m = txMsg{}
	m.op, m.qp, m.wrID, m.seq, m.mr, m.local = op, q, wr.ID, q.nextSeq, mr, local
	m.length, m.remoteAddr, m.rkey, m.imm = wr.Local.Length, wr.RemoteAddr, wr.RKey, wr.Imm
	m.placed, m.acked = placed, acked
	if op == OpSend || op == OpSendImm || op == OpWriteImm {
		m.recvSeq = q.nextRecvSeq
		q.nextRecvSeq++
	}
	q.nextSeq++
	if q.sq.Len() == 0 {
		c.startNoAck(now, q) // the QP's work waits for an acknowledgement from now
	}
	if c.mtu > 0 {
		c.sizeMsg(m)
	} // else establish sizes it, once the MTU is negotiated
	q.sq.Push(m)
	c.activate(q)
	c.ep.touch(c, now)
	return nil
}

// PostRecv queues a receive buffer (ibv_post_recv). SENDs and WRITE_IMMs
// consume receives in posting order.
func (q *QueuePair) PostRecv(now verbs.Time, wr verbs.RecvWR) error {
	c := q.conn
	if q.destroyed {
		return verbs.ErrQPDestroyed
	}
	if c.state >= connClosing {
		return ErrNotUsable
	}
	if q.rq.Len() >= c.ep.cfg.RecvQueueDepth {
		return ErrQueueFull
	}
	var mr *verbs.MemoryRegion
	var buf []byte
	if wr.Local.Length > 0 {
		var ok bool
		mr, buf, ok = c.ep.regions.ResolveLocal(q.pd, wr.Local, verbs.AccessLocalWrite)
		if !ok {
			return verbs.ErrBadSGE
		}
	}
	s := q.rq.Extend()
	// WCRecv until a message says otherwise (WRITE_IMM): a receive that
	// is flushed before any message reached it completes as a receive.
	*s = recvSlot{wrID: wr.ID, mr: mr, buf: buf, opcode: verbs.WCRecv}
	return nil
}

// OutstandingSends is the number of send work requests not yet completed.
func (q *QueuePair) OutstandingSends() int { return q.sq.Len() }

// PostedRecvs is the number of receives not yet completed.
func (q *QueuePair) PostedRecvs() int { return q.rq.Len() }

// completeSends reports, in posting order, every finished message at the
// front of the send queue.
func (q *QueuePair) completeSends() {
	capped := q.segIdx >= MsgWindow
	for q.sq.Len() > 0 {
		m := *q.sq.Front()
		if !m.finished {
			break
		}
		q.sq.Pop()
		q.sqBase++
		if q.segIdx > 0 {
			q.segIdx--
		}
		m.status = verbs.FailIfRevoked(m.mr, m.status)
		wc := verbs.WorkCompletion{WRID: m.wrID, Status: m.status, QPN: q.qpn}
		switch m.op {
		case OpSend, OpSendImm:
			wc.Opcode = verbs.WCSend
		case OpWrite, OpWriteImm:
			wc.Opcode = verbs.WCWrite
		case OpReadReq:
			wc.Opcode = verbs.WCRead
		}
		if m.status == verbs.StatusSuccess {
			wc.ByteLen = m.length
		}
		if q.sendCQ != nil {
			pushWC(q.sendCQ, wc)
		}
		if m.status == verbs.StatusSuccess {
			q.conn.c.MessagesSent++
		}
		m.completed = true
		q.conn.releaseMsg(m)
	}
	if capped && q.segIdx < MsgWindow {
		// The peer's window opened again (nextToSegment).
		q.conn.activate(q)
	}
}

// completeRecvs reports, in posting order, every finished receive at the
// front of the receive queue.
func (q *QueuePair) completeRecvs() {
	for q.rq.Len() > 0 {
		s := q.rq.Front()
		if !s.done {
			return
		}
		s.status = verbs.FailIfRevoked(s.mr, s.status)
		wc := verbs.WorkCompletion{WRID: s.wrID, Status: s.status, Opcode: s.opcode,
			Imm: s.imm, HasImm: s.hasImm, QPN: q.qpn}
		if s.status == verbs.StatusSuccess {
			wc.ByteLen = s.msgLen
			q.conn.c.MessagesReceived++
		} else if s.wire != verbs.StatusSuccess {
			q.conn.rememberError(q.id, q.rqBase, s.wire)
		}
		if q.recvCQ != nil {
			pushWC(q.recvCQ, wc)
		}
		s.mr, s.buf = nil, nil
		q.rq.Drop()
		q.rqBase++
	}
}
