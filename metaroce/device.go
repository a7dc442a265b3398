package metaroce

import (
	"fmt"

	"github.com/metaroce/metaroce/verbs"
)

// Device returns the endpoint as a verbs.Device: a session is one
// connection, and its queue pairs are the connection's streams (queue
// pair index i is stream i).
func (e *Endpoint) Device() verbs.Device { return device{e} }

type device struct{ *Endpoint }

var (
	_ verbs.Device        = device{}
	_ verbs.PlaneSteering = device{}
	_ verbs.QP            = (*QueuePair)(nil)
)

func (d device) Dial(now verbs.Time, peer verbs.PeerHandle, nqp int) (verbs.Session, error) {
	if nqp < 1 || nqp > d.cfg.Streams {
		return nil, fmt.Errorf("metaroce: %d queue pairs on one connection (streams: %d)", nqp, d.cfg.Streams)
	}
	c, err := d.Connect(now, peer)
	if err != nil {
		return nil, err
	}
	return Session{c, true}, nil
}

func (d device) Accept() (verbs.Session, bool) {
	c, ok := d.Endpoint.Accept()
	if !ok {
		return nil, false
	}
	return Session{c, false}, true
}

// Session is a connection as a verbs.Session.
type Session struct {
	C      *Conn
	dialed bool
}

func (s Session) Peer() verbs.PeerHandle { return s.C.Peer() }
func (s Session) Established() bool      { return s.C.Established() }
func (s Session) Connecting() bool       { return s.C.state == connConnecting }
func (s Session) Close(now verbs.Time)   { s.C.Close(now) }

// FailReason is why the connection failed (FailNone while it has not).
func (s Session) FailReason() verbs.FailReason { return s.C.reason }

// Origin is the dialer's connection id.
func (s Session) Origin() uint32 {
	if s.dialed {
		return uint32(s.C.LocalID())
	}
	return uint32(s.C.RemoteID())
}

// MaxQPs is the number of streams: the negotiated count once established,
// this end's limit before.
func (s Session) MaxQPs() int {
	if s.C.streams > 0 {
		return s.C.streams
	}
	return s.C.ep.cfg.Streams
}

func (s Session) CreateQP(i int, attr verbs.QPAttr) (verbs.QP, error) {
	if i < 0 || i >= 1<<16 {
		return nil, ErrField
	}
	q, err := s.C.CreateQP(StreamID(i), attr)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// Destroy ends this queue pair (stream) alone, as ibv_destroy_qp does: the
// connection and its other streams carry on, at both ends. Its send work
// completes with StatusFlushed (a message with packets in flight once they
// are resolved, so that no packet refers to recycled state), its posted
// receives complete with StatusFlushed at once, and from now on its
// stream is treated as unopened at this end: the peer's requests on it are
// answered receiver-not-ready (the peer's queue pair ends in
// StatusRNRRetryExceeded if it keeps posting, as a real peer's does with a
// vanished QP) and nothing is placed into this end's memory on its behalf.
// Late copies of WRITEs and SENDs that had completed here before Destroy
// are the exception: they are acknowledged as a live queue pair's would be
// (lateCopy), so that a message delivered before the destroy completes at
// its sender.
// The stream id is not reused within the connection.
func (q *QueuePair) Destroy(now verbs.Time) error {
	if q.destroyed {
		return verbs.ErrQPDestroyed
	}
	q.destroyed = true
	c := q.conn
	c.breakStream(q)
	for i := 0; i < q.rq.Len(); i++ {
		if s := q.rq.At(i); !s.done {
			s.done, s.status = true, verbs.StatusFlushed
		}
	}
	q.completeRecvs()
	c.clearWindow(q)
	c.ep.touch(c, now)
	return nil
}
