package rocev2

import "github.com/metaroce/metaroce/verbs"

// qpBudget is the queue pair's share of the ibv_qp_attr budgets: the
// endpoint's configuration (AckTimeoutCode, RetryCount, RNRRetry,
// MinRNRTimer) until the QP is given verbs.QPTimers (QPAttr.Timers at
// creation, or SetTimers at ibv_modify_qp to RTS), then those, as an HCA
// holds each QP to its own attributes. The CM's REQ and REP still carry
// the endpoint's values: they are exchanged before the QP exists.
type qpBudget struct {
	ackCode  uint8 // local ACK timeout code: 4.096 µs × 2^code; 0 = infinite
	retries  int   // RetryCount
	rnrRetry int   // RNRRetry: 0..6, 7 = without limit
	minRNR   uint8 // the RNR NAK timer code this QP's responder sends
}

func (b *qpBudget) fromConfig(cfg *Config) {
	*b = qpBudget{ackCode: cfg.AckTimeoutCode, retries: cfg.RetryCount, rnrRetry: cfg.RNRRetry, minRNR: cfg.MinRNRTimer}
}

func (b *qpBudget) fromTimers(t verbs.QPTimers) {
	*b = qpBudget{ackCode: t.Timeout, retries: int(min(t.RetryCnt, 7)), rnrRetry: int(min(t.RNRRetry, verbs.RNRForever)),
		minRNR: t.MinRNRTimer & 0x1F}
}

// SetTimers holds the queue pair to t from now on (ibv_modify_qp to RTS);
// the retry counts left restart from t's.
func (q *QueuePair) SetTimers(now verbs.Time, t verbs.QPTimers) {
	c := q.conn
	c.budget.fromTimers(t)
	c.retriesLeft, c.rnrLeft = c.budget.retries, c.budget.rnrRetry
	c.ep.touch(c, now)
}
