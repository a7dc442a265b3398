package rocev2

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/verbs"
)

// DirectQP is a queue pair connected out of band, the way verbs programs
// connect RC QPs: each side learns the other's QP number and starting PSN
// by its own means (perftest's and the pingpongs' TCP socket) and moves its
// QP to RTR and RTS with them. No CM message is exchanged for it, and the
// wire carries the QP numbers the caller chose, as an HCA's QPs carry
// theirs.
type DirectQP struct {
	// QPN is this QP's number (2..0xFFFFFF, not in use on the endpoint):
	// the peer's packets name it in their BTH.
	QPN uint32
	// RemoteQPN is the peer QP's number (ibv_qp_attr dest_qp_num).
	RemoteQPN uint32
	// RecvPSN is the first PSN this responder expects: the peer's send
	// PSN (ibv_qp_attr rq_psn, set at RTR).
	RecvPSN PSN
	// SendPSN is this requester's first PSN (ibv_qp_attr sq_psn, set at
	// RTS; SetSendPSN may set it later, before the first post).
	SendPSN PSN
	// Attr is the QP's protection domain, completion queues and budgets.
	Attr verbs.QPAttr
}

// Errors of OpenQP.
var (
	ErrQPNInUse = errors.New("rocev2: QP number in use")
	ErrBadQPN   = errors.New("rocev2: QP number out of range (2..0xFFFFFF)")
)

// OpenQP creates a queue pair to peer that is connected at once (the verbs
// RTR transition with the attributes in d): the responder accepts requests
// from now on, and work posted goes out at once. The endpoint's MaxQPs
// bounds these QPs with the CM's. Destroying the QP (QueuePair.Destroy)
// sends the peer nothing, as destroying an HCA's QP does: the peer finds
// out by its own timeouts.
func (e *Endpoint) OpenQP(now verbs.Time, peer verbs.PeerHandle, d DirectQP) (*QueuePair, error) {
	switch {
	case d.QPN < 2 || d.QPN > PSNMask || d.RemoteQPN < 2 || d.RemoteQPN > PSNMask:
		return nil, ErrBadQPN
	case e.qps[d.QPN] != nil:
		return nil, fmt.Errorf("%w: %#x", ErrQPNInUse, d.QPN)
	case len(e.qps) >= e.cfg.MaxQPs:
		return nil, ErrNoQPN
	}
	e.seen(now)
	c := newConn(e, now, peer, d.QPN)
	c.direct = true
	c.setPeer(d.RemoteQPN, d.RecvPSN&PSNMask, e.cfg.MTU)
	c.setSendPSN(d.SendPSN)
	if _, err := c.CreateQP(d.Attr); err != nil {
		return nil, err
	}
	e.qps[c.qpn] = c
	c.establish(now)
	e.touch(c, now)
	return &c.qp, nil
}

// ErrPSNLate: the send PSN can change only before the first send.
var ErrPSNLate = errors.New("rocev2: the send PSN is set before the first work request")

// SetSendPSN sets the queue pair's first send PSN (ibv_modify_qp to RTS
// with sq_psn after the RTR that created it). It fails once work has been
// posted.
func (q *QueuePair) SetSendPSN(psn PSN) error {
	c := q.conn
	if c.sq.Len() > 0 || c.nextPSN != c.psnStart {
		return ErrPSNLate
	}
	c.setSendPSN(psn)
	return nil
}

// setSendPSN restarts the requester's sequence at psn (nothing sent yet).
func (c *Conn) setSendPSN(psn PSN) {
	psn &= PSNMask
	c.psnStart = psn
	c.nextPSN, c.una, c.sndPSN, c.sndMax = psn, psn, psn, psn
}
