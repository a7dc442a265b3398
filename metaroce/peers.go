package metaroce

import (
	"sort"

	"github.com/metaroce/metaroce/verbs"
)

// peerIndex finds an endpoint's connections by their peer, so that a
// CONNECT (is it a repeat of one we accepted? is its peer over its limit?)
// and a proven connection (does the peer have connections from an earlier
// incarnation?) cost the same with one connection as with thousands,
// instead of a walk over every connection.
//
// Every key includes the peer's address (the backend's PeerHandle): a
// packet from one address says nothing about connections to another, so a
// CONNECT that names a node's id from elsewhere cannot reach that node's
// connections. Its size is bounded by the endpoint's connection limits:
// an entry exists only while a connection does.
type peerIndex struct {
	inbound map[inboundKey]*Conn     // accepted connections, by who opened them
	groups  map[groupKey]*peerGroup  // connections with their peer known, by address and node
	inPeer  map[verbs.PeerHandle]int // inbound connections (any state) by address
}

type inboundKey struct {
	peer   verbs.PeerHandle
	node   NodeID
	inc    Incarnation
	remote ConnID
}

type groupKey struct {
	peer verbs.PeerHandle
	node NodeID
}

// peerGroup is the connections to one node at one address. Restart
// detection walks one group, never the whole table; a group is bounded by
// MaxConnsPerPeer (inbound) plus the connections this side opened.
type peerGroup struct {
	conns []*Conn             // c.groupPos is c's place here
	incs  map[Incarnation]int // how many of conns have each peer incarnation
}

func (x *peerIndex) init() {
	if x.groups == nil {
		x.inbound, x.groups, x.inPeer = map[inboundKey]*Conn{}, map[groupKey]*peerGroup{}, map[verbs.PeerHandle]int{}
	}
}

// addInbound records an inbound connection as soon as it is accepted, so a
// repeated CONNECT finds it and the per-peer limit counts it.
func (x *peerIndex) addInbound(c *Conn) {
	x.init()
	x.inbound[inboundKey{c.peer, c.peerNode, c.peerInc, c.remote}] = c
	x.inPeer[c.peer]++
	c.inboundIndexed = true
	x.addGroup(c)
}

// inboundFrom is the number of inbound connections from peer.
func (x *peerIndex) inboundFrom(peer verbs.PeerHandle) int { return x.inPeer[peer] }

// accepted is the connection we accepted from remote of node in
// incarnation inc at peer, or nil.
func (x *peerIndex) accepted(peer verbs.PeerHandle, node NodeID, inc Incarnation, remote ConnID) *Conn {
	return x.inbound[inboundKey{peer, node, inc, remote}]
}

// addGroup puts c in its peer's group: an outbound connection at its
// ACCEPT, an inbound one at its CONNECT. Being in the group makes it a
// candidate for restart detection; only a proven connection triggers one
// (Endpoint.peerSeen).
func (x *peerIndex) addGroup(c *Conn) {
	if c.groupPos > 0 {
		return
	}
	x.init()
	k := groupKey{c.peer, c.peerNode}
	g := x.groups[k]
	if g == nil {
		g = &peerGroup{incs: map[Incarnation]int{}}
		x.groups[k] = g
	}
	g.conns = append(g.conns, c)
	c.groupPos = len(g.conns)
	g.incs[c.peerInc]++
}

// remove forgets c (a no-op for what it was never added to).
func (x *peerIndex) remove(c *Conn) {
	if c.inboundIndexed {
		c.inboundIndexed = false
		k := inboundKey{c.peer, c.peerNode, c.peerInc, c.remote}
		if x.inbound[k] == c {
			delete(x.inbound, k)
		}
		if x.inPeer[c.peer]--; x.inPeer[c.peer] <= 0 {
			delete(x.inPeer, c.peer)
		}
	}
	if c.groupPos == 0 {
		return
	}
	k := groupKey{c.peer, c.peerNode}
	g := x.groups[k]
	i, last := c.groupPos-1, len(g.conns)-1
	g.conns[i] = g.conns[last]
	g.conns[i].groupPos = i + 1
	g.conns[last] = nil
	g.conns = g.conns[:last]
	c.groupPos = 0
	if g.incs[c.peerInc]--; g.incs[c.peerInc] == 0 {
		delete(g.incs, c.peerInc)
	}
	if len(g.conns) == 0 {
		delete(x.groups, k)
	}
}

// staleFor returns, in id order (completions must not depend on map or
// slice order), the established connections of c's group whose peer
// incarnation is not c's: the peer restarted and lost their state. It
// walks c's group only, and only when another incarnation is there.
func (x *peerIndex) staleFor(c *Conn, into []*Conn) []*Conn {
	g := x.groups[groupKey{c.peer, c.peerNode}]
	if g == nil || len(g.incs) < 2 {
		return into
	}
	for _, o := range g.conns {
		if o != c && o.state == connEstablished && o.peerInc != c.peerInc {
			into = append(into, o)
		}
	}
	sort.Slice(into, func(i, j int) bool { return into[i].ordinal < into[j].ordinal })
	return into
}
