package rocev2

import (
	"errors"

	"github.com/metaroce/metaroce/verbs"
)

// Device returns the endpoint as a verbs.Device. An RC connection carries
// exactly one queue pair, so a dialed session of N queue pairs is N
// connections (queue pair i on connection i), and every accepted
// connection is a session of its own, with one queue pair.
func (e *Endpoint) Device() verbs.Device { return device{e} }

type device struct{ *Endpoint }

var (
	_ verbs.Device = device{}
	_ verbs.QP     = (*QueuePair)(nil)
)

func (d device) Dial(now verbs.Time, peer verbs.PeerHandle, nqp int) (verbs.Session, error) {
	if nqp < 1 {
		return nil, errors.New("rocev2: a session needs at least one queue pair")
	}
	s := &Session{Conns: make([]*Conn, 0, nqp), dialed: true}
	for range nqp {
		c, err := d.Connect(now, peer)
		if err != nil {
			s.Close(now)
			return nil, err
		}
		s.Conns = append(s.Conns, c)
	}
	return s, nil
}

func (d device) Accept() (verbs.Session, bool) {
	c, ok := d.Endpoint.Accept()
	if !ok {
		return nil, false
	}
	return &Session{Conns: []*Conn{c}}, true
}

// Session is a set of RC connections to one peer as a verbs.Session.
type Session struct {
	Conns  []*Conn // queue pair i is Conns[i]'s
	dialed bool
}

func (s *Session) Peer() verbs.PeerHandle { return s.Conns[0].Peer() }
func (s *Session) MaxQPs() int            { return len(s.Conns) }

// Origin is the dialer's QPN of the session's first connection.
func (s *Session) Origin() uint32 {
	if s.dialed {
		return s.Conns[0].QPN()
	}
	return s.Conns[0].RemoteQPN()
}

func (s *Session) Established() bool {
	for _, c := range s.Conns {
		if !c.Established() {
			return false
		}
	}
	return true
}

// FailReason is the reason of the first of the session's QPs that failed
// (FailNone when none has).
func (s *Session) FailReason() verbs.FailReason {
	for _, c := range s.Conns {
		if c.reason != verbs.FailNone {
			return c.reason
		}
	}
	return verbs.FailNone
}

func (s *Session) Connecting() bool {
	up := true
	for _, c := range s.Conns {
		if c.state >= stateError {
			return false
		}
		up = up && c.state == stateEstablished
	}
	return !up
}

func (s *Session) CreateQP(i int, attr verbs.QPAttr) (verbs.QP, error) {
	if i < 0 || i >= len(s.Conns) {
		return nil, ErrNoQP
	}
	q, err := s.Conns[i].CreateQP(attr)
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (s *Session) Close(now verbs.Time) {
	for _, c := range s.Conns {
		c.Close(now)
	}
}

// Destroy closes the queue pair's connection (ibv_destroy_qp): on RoCEv2
// a connection is one queue pair, so nothing else is affected. Its
// outstanding work completes with StatusFlushed; posting afterwards fails.
func (q *QueuePair) Destroy(now verbs.Time) error {
	if q.destroyed {
		return verbs.ErrQPDestroyed
	}
	q.destroyed = true
	q.conn.Close(now)
	return nil
}
