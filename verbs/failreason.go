package verbs

// FailReason says why a connection (a session's, or a RoCEv2 QP's) ended
// in failure. A failed connection's work requests all complete in error
// with one status (StatusRetryExceeded, mostly), which cannot tell a dead
// peer from a RESET, a restart or a refusal; the reason can, so a front
// end can tell its user which it was. It is set once, when the connection
// fails, and costs nothing on the packet path.
type FailReason uint8

const (
	// FailNone: the connection has not failed (it may be up, connecting,
	// or closed in order).
	FailNone FailReason = iota
	// FailPeerDead: nothing arrived from the peer for the peer-dead
	// timeout (metaroce.peer_dead_timeout).
	FailPeerDead
	// FailReset: the peer answered with a RESET: it no longer knows the
	// connection.
	FailReset
	// FailPeerRestart: the peer came back with a new incarnation, so the
	// state of this connection is lost at its end.
	FailPeerRestart
	// FailRefused: the peer refused the connection request (a RESET to a
	// CONNECT, a CM REJ).
	FailRefused
	// FailConnectTimeout: the connection request was never answered.
	FailConnectTimeout
	// FailRetryExceeded: a request went unacknowledged through every
	// retry (RoCEv2's retry_cnt).
	FailRetryExceeded
	// FailRNRRetryExceeded: the peer answered receiver-not-ready through
	// every RNR retry (RoCEv2's rnr_retry).
	FailRNRRetryExceeded
	// FailRemoteError: the peer refused a request (access, invalid
	// request, operation error) and the QP went to the error state; the
	// work request's status says which.
	FailRemoteError
	// FailLocalError: this end put the QP in the error state: a work
	// request's source was deregistered mid-send, or the peer's request
	// was refused by this end's responder.
	FailLocalError
)

func (r FailReason) String() string {
	switch r {
	case FailNone:
		return "not failed"
	case FailPeerDead:
		return "peer dead (nothing heard within the peer-dead timeout)"
	case FailReset:
		return "reset by the peer"
	case FailPeerRestart:
		return "peer restarted (new incarnation)"
	case FailRefused:
		return "connection refused by the peer"
	case FailConnectTimeout:
		return "connection request unanswered"
	case FailRetryExceeded:
		return "retry exceeded (no acknowledgement)"
	case FailRNRRetryExceeded:
		return "RNR retry exceeded (receiver not ready)"
	case FailRemoteError:
		return "remote error (the peer refused a request)"
	case FailLocalError:
		return "local error (this end refused a work request or the peer's request)"
	}
	return "unknown"
}
