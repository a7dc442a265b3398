package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Per-QP transport budgets (verbs.QPTimers, from ibv_modify_qp's timeout,
// retry_cnt, rnr_retry and min_rnr_timer). A QP without them is held to
// the endpoint's configuration, exactly as before they existed: its RNR
// retries are Config.RNRRetries with the doubling Config.RNRBackoff, and
// nothing but the connection's peer-dead timer fails its work for want of
// acknowledgements.
//
// A QP with them:
//   - retries a message after receiver-not-ready RNRRetry times (7: without
//     limit), waiting what the responder's NAK asks for (the peer QP's
//     min_rnr_timer) or, from a responder without one, the endpoint's
//     back-off;
//   - answers receiver-not-ready with its own min_rnr_timer;
//   - fails its oldest outstanding message with StatusRetryExceeded, and
//     flushes the rest (the stream goes to the error state, as a verbs QP
//     does), when it went NoAckLimit (timeout × (retry_cnt+1)) without any
//     acknowledgement of its work. The connection's peer-dead logic is
//     untouched: on a multipath connection this is about one QP's work
//     making no progress, whatever the connection's other streams do.
//
// The no-ACK clock runs only while the connection is established and the
// QP has work outstanding: it starts when the QP's send queue stops being
// empty (or at establishment, for work posted while connecting), restarts
// at every ACK or NAK that concerns the QP's work, and does not run during
// an RNR back-off. The connection keeps one lower bound (Conn.qpCheckAt)
// of the QPs' deadlines: moving a QP's clock forward costs a store, and
// only when the bound is reached are the QPs walked (once per limit, not
// per packet).

// qpTimers is a QP's budgets and its no-ACK clock.
type qpTimers struct {
	set        bool
	noAck      time.Duration // 0: no limit (timeout 0, or no timers)
	rnrTries   int           // RNR retries allowed; -1: without limit
	rnrWait    time.Duration // what this QP's RNR NAKs ask the peer to wait
	progressAt verbs.Time    // start of the current wait for an acknowledgement
}

// SetTimers holds q to t from now on (ibv_modify_qp to RTR or RTS). Work
// already outstanding starts its no-ACK clock now.
func (q *QueuePair) SetTimers(now verbs.Time, t verbs.QPTimers) {
	q.timers = qpTimers{set: true, noAck: t.NoAckLimit(), rnrTries: t.RNRRetries(),
		rnrWait: verbs.RNRTimer(t.MinRNRTimer)}
	if q.sq.Len() > 0 {
		q.conn.startNoAck(now, q)
		q.conn.ep.touch(q.conn, now)
	}
}

// startNoAck starts q's no-ACK clock (q has work outstanding).
func (c *Conn) startNoAck(now verbs.Time, q *QueuePair) {
	if q.timers.noAck == 0 || c.state != connEstablished {
		return
	}
	q.timers.progressAt = now
	c.armNoAck(now.Add(q.timers.noAck))
}

// armNoAck lowers the connection's bound of the QPs' no-ACK deadlines.
func (c *Conn) armNoAck(at verbs.Time) {
	if c.qpCheckAt == 0 || at < c.qpCheckAt {
		c.qpCheckAt = at
	}
}

// progressed restarts q's no-ACK clock: something of its work was
// acknowledged (or refused) at now. Constant work: the bound stays.
func (q *QueuePair) progressed(now verbs.Time) {
	if q.timers.noAck > 0 {
		q.timers.progressAt = now
	}
}

// rnrRetries is how often q may retry a message after receiver-not-ready
// (-1: without limit).
func (c *Conn) rnrRetries(q *QueuePair) int {
	if q.timers.set {
		return q.timers.rnrTries
	}
	return c.ep.cfg.RNRRetries
}

// rnrNakWait is the wait an RNR NAK for stream id asks for: the QP's
// min_rnr_timer, or 0 (the requester's own back-off) without timers.
func (c *Conn) rnrNakWait(id StreamID) uint32 {
	q := c.QP(id)
	if q == nil || q.destroyed || !q.timers.set {
		return 0
	}
	return uint32(q.timers.rnrWait)
}

// checkNoAck runs when the bound is reached: it fails the work of every
// QP whose clock ran out and sets the bound to the earliest clock left.
func (c *Conn) checkNoAck(now verbs.Time) {
	c.qpCheckAt = 0
	for _, q := range c.qpOrder {
		if q.timers.noAck == 0 || q.broken || q.destroyed || q.sq.Len() == 0 {
			continue
		}
		due := max(q.timers.progressAt, q.blockedUntil).Add(q.timers.noAck)
		if now < due {
			c.armNoAck(due)
			continue
		}
		c.noAckExceeded(q)
	}
}

// noAckExceeded ends q's outstanding work: the oldest unfinished message
// completes with StatusRetryExceeded, the rest with StatusFlushed, and the
// stream is in the error state (breakStream). They complete now, even with
// packets in flight: those go out as NOPs from now on (writeSequenced),
// late answers find no message (placeReadResp looks in the send queue),
// and the messages return to the pool only once no slot refers to them
// (releaseMsg).
func (c *Conn) noAckExceeded(q *QueuePair) {
	c.c.QPAckTimeouts++
	first := true
	for i := 0; i < q.sq.Len(); i++ {
		m := *q.sq.At(i)
		if m.finished {
			continue
		}
		if first && m.status == verbs.StatusSuccess {
			m.status = verbs.StatusRetryExceeded
		} else if m.status == verbs.StatusSuccess {
			m.status = verbs.StatusFlushed
		}
		first = false
		m.segDone, m.finished = true, true
	}
	c.breakStream(q)
}
