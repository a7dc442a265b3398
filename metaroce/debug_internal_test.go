package metaroce

import "fmt"

func (c *Conn) debugString() string {
	s := fmt.Sprintf("conn %d state=%s failure=%v resend=%d moved=%d active=%d jobs=%d ctrl=%d acks=%d deadline=%d\n", c.local, c.state, c.failure, c.resend.Len(), c.moved.Len(), c.active.Len(), c.jobs.Len(), c.ctrl.Len(), c.ackList.Len(), c.sched.Deadline)
	for i := range c.tx {
		p := &c.tx[i]
		s += fmt.Sprintf(" tx%d gen=%d una=%d next=%d inUse=%d failed=%v timeouts=%d srtt=%v lastProg=%d delivered=%d\n", i, p.gen, p.una, p.next, p.inUse, p.failed, p.timeouts, p.srtt, p.lastProgress, p.delivered)
		for psn := p.una; psn.Less(p.next); psn++ {
			sl := p.slot(psn)
			s += fmt.Sprintf("   psn %d kind=%d pending=%v nop=%v sentAt=%d off=%d\n", psn, sl.kind, sl.pending, sl.nop, sl.sentAt, sl.offset)
		}
		r := &c.rx[i]
		s += fmt.Sprintf(" rx%d gen=%d cum=%d sack=%x unacked=%d due=%d\n", i, r.gen, r.sb.cum, r.sb.sack, r.unacked, r.ackDue)
	}
	for id, q := range c.qps {
		if q != nil && q.sq.Len() > 0 || q.rq.Len() > 0 {
			s += fmt.Sprintf(" qp%d sq=%d segIdx=%d blocked=%d active=%v rq=%d rqBase=%d\n", id, q.sq.Len(), q.segIdx, q.blockedUntil, q.active, q.rq.Len(), q.rqBase)
			for i := 0; i < q.sq.Len(); i++ {
				m := *q.sq.At(i)
				s += fmt.Sprintf("   msg seq=%d op=%v len=%d seg=%d/%v acked=%d/%d out=%d fin=%v st=%v att=%d\n", m.seq, m.op, m.length, m.segOff, m.segDone, m.ackedChunks, m.nChunks, m.outstanding, m.finished, m.status, m.attempt)
			}
		}
	}
	return s
}

// DebugString dumps internal state (tests only).
func DebugString(c *Conn) string { return c.debugString() }
