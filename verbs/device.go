package verbs

import "errors"

// Device is one transport endpoint as an application sees it (an opened
// ibv_context with its port): it allocates protection domains, dials and
// accepts sessions, and is driven by its backend through Transport. Each
// transport core provides one (metaroce.Endpoint.Device,
// rocev2.Endpoint.Device); front ends that only use this interface run
// either transport without naming it.
type Device interface {
	Transport
	// AllocPD returns a new protection domain (ibv_alloc_pd); regions and
	// queue pairs in it belong to this device.
	AllocPD() *ProtectionDomain
	// Dial opens a session to peer that will carry up to nqp queue pairs
	// (nqp >= 1). The session may still be connecting; queue pairs may be
	// created at once.
	Dial(now Time, peer PeerHandle, nqp int) (Session, error)
	// Accept returns the next session a peer opened to this device, or
	// false when none is waiting. A transport whose connections carry one
	// queue pair each returns one session per connection.
	Accept() (Session, bool)
}

// Session is the connection state shared by a set of queue pairs to one
// peer: paths, congestion state and liveness. metaroce carries all of a
// session's queue pairs on one connection (a stream each); RoCEv2 has one
// RC connection per queue pair, so its session of N queue pairs is N
// connections.
type Session interface {
	Peer() PeerHandle
	// Origin names the session identically at both ends: the dialer's own
	// id for it. With the dialer's address it is unique among the
	// sessions a device accepts.
	Origin() uint32
	// Established reports whether every connection of the session is up.
	Established() bool
	// Connecting reports whether the session may still become established
	// (false once it is up, closed or failed).
	Connecting() bool
	// FailReason says why the session failed (FailNone while it has not):
	// its work requests' status alone cannot tell a dead peer from a
	// reset, a restart or a refusal.
	FailReason() FailReason
	// MaxQPs is how many queue pairs the session can carry: CreateQP takes
	// an index below it.
	MaxQPs() int
	// CreateQP creates the session's queue pair with index i. Both ends
	// must create the same indices; queue pairs of equal index are peers.
	CreateQP(i int, attr QPAttr) (QP, error)
	// Close flushes every queue pair of the session (their outstanding
	// work completes with StatusFlushed, here and at the peer) and ends it.
	Close(now Time)
}

// QP is a reliable-connected queue pair (ibv_qp).
type QP interface {
	// QPN is the queue pair's number; its completions carry it.
	QPN() QPN
	// PostSend queues a WRITE, SEND or READ (ibv_post_send). The local
	// buffer is checked now; remote checks happen at the peer and come back
	// as an error completion.
	PostSend(now Time, wr SendWR) error
	// PostRecv queues a receive (ibv_post_recv).
	PostRecv(now Time, wr RecvWR) error
	// Destroy ends this queue pair alone (ibv_destroy_qp): its own
	// outstanding work completes with StatusFlushed, new posts fail with
	// ErrQPDestroyed, and the session and the peer's other queue pairs are
	// not affected (the peer's queue pair of the same index sees its
	// requests unanswered, as with a real HCA).
	Destroy(now Time) error
}

// ErrQPDestroyed is what posting to a destroyed queue pair returns.
var ErrQPDestroyed = errors.New("verbs: queue pair destroyed")
