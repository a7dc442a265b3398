package metaroce

import "github.com/metaroce/metaroce/verbs"

// Admission control: what a CONNECT may cost before its sender has shown
// that it receives at the address it claims.
//
// A CONNECT costs a connection record (a Conn without paths: no slot
// rings, no per-path state, no aggregates), an ACCEPT, and entries in the
// endpoint's maps; the paths are allocated when the peer proves it is
// there, with its first packet on the connection (it names the id our
// ACCEPT carried), or when the local application posts work on it. This
// adds no round trip: the connection is established at once, as before,
// and behaves the same on the wire.
//
// Unproven inbound connections ("half-open") are bounded by MaxHalfOpen:
// when the bound is reached, the oldest one is dropped silently to make
// room (a SYN cache, not a refusal: a flood cannot keep a genuine client
// out that answers within MaxHalfOpen CONNECTs' time). Every connection
// counts against MaxConns and every inbound one against MaxConnsPerPeer
// of its address; past those, and past a full accept queue, a CONNECT is
// refused on the wire (a RESET with src_conn 0: the client's Connect fails
// with FailRefused).

// connLink is a Conn's place in one connList.
type connLink struct {
	prev, next *Conn
	in         bool
}

// connList is an intrusive FIFO of connections with O(1) removal from
// anywhere, so a connection that dies leaves the lists it was on at once
// (no list holds a dead connection, no removal walks).
type connList struct {
	head, tail *Conn
	n          int
	link       func(*Conn) *connLink
}

func (l *connList) Len() int { return l.n }

func (l *connList) pushBack(c *Conn) {
	k := l.link(c)
	if k.in {
		return
	}
	*k = connLink{prev: l.tail, in: true}
	if l.tail != nil {
		l.link(l.tail).next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *connList) remove(c *Conn) {
	k := l.link(c)
	if !k.in {
		return
	}
	if k.prev != nil {
		l.link(k.prev).next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		l.link(k.next).prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = connLink{}
	l.n--
}

// popFront removes and returns the oldest connection (nil if none).
func (l *connList) popFront() *Conn {
	c := l.head
	if c != nil {
		l.remove(c)
	}
	return c
}

// tokenBucket limits the answers the endpoint sends to packets it cannot
// place (RESETs for unknown connections, refusals of CONNECTs): rate
// tokens per second up to burst, refilled from the time the core is given.
type tokenBucket struct {
	tokens float64
	last   verbs.Time
	primed bool
}

// take reports whether one answer may go now, and spends its token.
func (b *tokenBucket) take(now verbs.Time, rate float64, burst int) bool {
	if !b.primed {
		b.primed, b.tokens, b.last = true, float64(burst), now
	}
	if now > b.last {
		b.tokens += rate * now.Sub(b.last).Seconds()
		b.last = now
	}
	b.tokens = min(b.tokens, float64(burst))
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// halfOpenLink and acceptLink select a Conn's place in the endpoint's two
// lists.
func halfOpenLink(c *Conn) *connLink { return &c.halfOpen }
func acceptLink(c *Conn) *connLink   { return &c.acceptQ }

// admit decides whether a new inbound connection from peer may be
// created, making room among the half-open ones if needed. It returns
// false (counted) when the CONNECT must be refused.
func (e *Endpoint) admit(peer verbs.PeerHandle) bool {
	cfg := &e.cfg
	switch {
	case e.peers.inboundFrom(peer) >= cfg.MaxConnsPerPeer:
		e.c.RefusedPerPeer++
		return false
	case e.accepted.Len() >= cfg.AcceptBacklog:
		e.c.RefusedBacklog++
		return false
	}
	for e.halfOpen.Len() >= cfg.MaxHalfOpen {
		c := e.halfOpen.popFront()
		e.c.HalfOpenEvicted++
		c.fail(verbs.StatusRetryExceeded, verbs.FailConnectTimeout)
	}
	if len(e.conns) >= cfg.MaxConns {
		e.c.RefusedMaxConns++
		return false
	}
	return true
}

// refuse answers a CONNECT the endpoint will not take, with a RESET that
// proves it saw the CONNECT: tagged with the token the CONNECT carried.
func (e *Endpoint) refuse(now verbs.Time, peer verbs.PeerHandle, src ConnID, tok *Token) {
	e.c.ConnectsRefused++
	if !e.resets.take(now, e.cfg.ResetRate, e.cfg.ResetBurst) {
		e.c.ResetsLimited++
		return
	}
	e.replyProving(reply{peer: peer, op: OpReset, dst: src, tok: *tok, hasTok: true})
	e.c.ResetsSent++
}

// resetTo queues a RESET, within the rate limit. A RESET is the bare
// header (36 bytes with its CRC), and only a packet that passed the
// header's checks provokes one, so it is never larger than what provoked
// it: no reflection gain for a spoofed source.
func (e *Endpoint) resetTo(now verbs.Time, peer verbs.PeerHandle, dst, src ConnID) {
	if !e.resets.take(now, e.cfg.ResetRate, e.cfg.ResetBurst) {
		e.c.ResetsLimited++
		return
	}
	e.reply(peer, OpReset, dst, src)
	e.c.ResetsSent++
}

// prove marks an inbound connection as shown to be there: a packet of
// its peer showed the token our ACCEPT carried to the address (a tag, or
// a PSN in a first window: token.go). Only now does it get its paths and
// leave the anti-amplification budget.
func (c *Conn) prove() {
	if !c.halfOpen.in {
		return
	}
	c.ep.halfOpen.remove(c)
	c.materialize()
}

// provenByTag runs restart detection for an inbound connection at its
// first tagged packet (the initiator sends one right after our ACCEPT):
// the 64-bit proof of our token, where a PSN in a first window is only
// 24 bits, is what it takes to fail the node's other connections at that
// address (so a CONNECT alone, spoofed or not, fails nothing).
func (c *Conn) provenByTag() {
	if c.outbound || c.restartChecked {
		return
	}
	c.restartChecked = true
	c.ep.peerSeen(c)
}
