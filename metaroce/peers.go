package metaroce

// peerIndex finds an endpoint's connections by their peer, so that a
// CONNECT (is it a repeat of one we accepted?) and a new connection (does
// the peer have connections from an earlier incarnation?) cost the same
// with one connection as with thousands, instead of a walk over every
// connection.
type peerIndex struct {
	inbound map[inboundKey]*Conn // accepted connections, by who opened them
	nodes   map[NodeID]int       // connections with their peer known, by peer node
	incs    map[nodeInc]int      // the same, by peer node and incarnation
}

type inboundKey struct {
	node   NodeID
	inc    Incarnation
	remote ConnID
}

type nodeInc struct {
	node NodeID
	inc  Incarnation
}

// add records c once its peer (node, incarnation, remote id) is known.
func (x *peerIndex) add(c *Conn) {
	if c.peerIndexed {
		return
	}
	if x.nodes == nil {
		x.inbound, x.nodes, x.incs = map[inboundKey]*Conn{}, map[NodeID]int{}, map[nodeInc]int{}
	}
	c.peerIndexed = true
	if !c.outbound {
		x.inbound[inboundKey{c.peerNode, c.peerInc, c.remote}] = c
	}
	x.nodes[c.peerNode]++
	x.incs[nodeInc{c.peerNode, c.peerInc}]++
}

// remove forgets c (a no-op if it was never added).
func (x *peerIndex) remove(c *Conn) {
	if !c.peerIndexed {
		return
	}
	c.peerIndexed = false
	if !c.outbound {
		delete(x.inbound, inboundKey{c.peerNode, c.peerInc, c.remote})
	}
	if x.nodes[c.peerNode]--; x.nodes[c.peerNode] == 0 {
		delete(x.nodes, c.peerNode)
	}
	k := nodeInc{c.peerNode, c.peerInc}
	if x.incs[k]--; x.incs[k] == 0 {
		delete(x.incs, k)
	}
}

// accepted is the connection we accepted from remote of node in
// incarnation inc, or nil.
func (x *peerIndex) accepted(node NodeID, inc Incarnation, remote ConnID) *Conn {
	return x.inbound[inboundKey{node, inc, remote}]
}

// otherIncarnations reports whether c's peer node has connections here
// from another incarnation than c's.
func (x *peerIndex) otherIncarnations(c *Conn) bool {
	return x.nodes[c.peerNode] > x.incs[nodeInc{c.peerNode, c.peerInc}]
}
