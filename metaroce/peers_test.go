package metaroce

import "testing"

// TestPeerIndex: accepted finds exactly the inbound connections recorded
// (by address, node, incarnation and remote id), staleFor finds the other
// incarnations of a node at the same address only, and remove undoes
// both adds (twice is harmless), leaving the maps empty.
func TestPeerIndex(t *testing.T) {
	var x peerIndex
	est := connEstablished
	in1 := &Conn{peer: 1, peerNode: 7, peerInc: 1, remote: 10, local: 1, state: est}
	in2 := &Conn{peer: 1, peerNode: 7, peerInc: 1, remote: 11, local: 2, state: est}
	out := &Conn{peer: 1, peerNode: 7, peerInc: 1, remote: 12, local: 3, state: est, outbound: true}
	elsewhere := &Conn{peer: 2, peerNode: 7, peerInc: 1, remote: 10, local: 4, state: est}
	for _, c := range []*Conn{in1, in2, elsewhere} {
		x.addInbound(c)
	}
	for _, c := range []*Conn{in1, in2, out, elsewhere, in1} {
		x.addGroup(c)
	}
	if x.accepted(1, 7, 1, 10) != in1 || x.accepted(1, 7, 1, 11) != in2 || x.accepted(2, 7, 1, 10) != elsewhere {
		t.Fatal("accepted connections not found")
	}
	if x.accepted(1, 7, 1, 12) != nil || x.accepted(1, 7, 2, 10) != nil || x.accepted(1, 8, 1, 10) != nil || x.accepted(3, 7, 1, 10) != nil {
		t.Fatal("found a connection that was not accepted from that peer")
	}
	if x.inboundFrom(1) != 2 || x.inboundFrom(2) != 1 || x.inboundFrom(3) != 0 {
		t.Fatalf("inbound per address: %d %d %d, want 2 1 0", x.inboundFrom(1), x.inboundFrom(2), x.inboundFrom(3))
	}
	if s := x.staleFor(in1, nil); len(s) != 0 {
		t.Fatalf("one incarnation only, but %d stale", len(s))
	}
	restarted := &Conn{peer: 1, peerNode: 7, peerInc: 2, remote: 10, local: 5, state: est}
	x.addInbound(restarted)
	x.addGroup(restarted)
	s := x.staleFor(restarted, nil)
	if len(s) != 3 || s[0] != in1 || s[1] != in2 || s[2] != out {
		t.Fatalf("stale for the restart at address 1: %v, want in1, in2, out in id order (not the one at address 2)", s)
	}
	if x.accepted(1, 7, 2, 10) != restarted || x.accepted(1, 7, 1, 10) != in1 {
		t.Fatal("same remote id of two incarnations confused")
	}
	for _, c := range []*Conn{in1, in2, out, out, elsewhere} {
		x.remove(c)
	}
	if len(x.staleFor(restarted, nil)) != 0 || x.accepted(1, 7, 1, 10) != nil {
		t.Fatal("removed connections still counted")
	}
	x.remove(restarted)
	if len(x.groups) != 0 || len(x.inPeer) != 0 || len(x.inbound) != 0 {
		t.Fatalf("index not empty: %d %d %d", len(x.groups), len(x.inPeer), len(x.inbound))
	}
}
