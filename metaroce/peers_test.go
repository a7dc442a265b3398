package metaroce

import "testing"

// TestPeerIndex: accepted finds exactly the inbound connections that are
// recorded, otherIncarnations counts connections per node and
// incarnation, and remove undoes add (twice is harmless).
func TestPeerIndex(t *testing.T) {
	var x peerIndex
	in1 := &Conn{peerNode: 7, peerInc: 1, remote: 10}
	in2 := &Conn{peerNode: 7, peerInc: 1, remote: 11}
	out := &Conn{peerNode: 7, peerInc: 1, remote: 12, outbound: true}
	for _, c := range []*Conn{in1, in2, out, in1} {
		x.add(c)
	}
	if x.accepted(7, 1, 10) != in1 || x.accepted(7, 1, 11) != in2 {
		t.Fatal("accepted connections not found")
	}
	if x.accepted(7, 1, 12) != nil || x.accepted(7, 2, 10) != nil || x.accepted(8, 1, 10) != nil {
		t.Fatal("found a connection that was not accepted from that peer")
	}
	if x.otherIncarnations(in1) {
		t.Fatal("one incarnation only, but others reported")
	}
	restarted := &Conn{peerNode: 7, peerInc: 2, remote: 10}
	x.add(restarted)
	if !x.otherIncarnations(restarted) || !x.otherIncarnations(in1) {
		t.Fatal("two incarnations of node 7, not reported")
	}
	if x.accepted(7, 2, 10) != restarted || x.accepted(7, 1, 10) != in1 {
		t.Fatal("same remote id of two incarnations confused")
	}
	for _, c := range []*Conn{in1, in2, out, out} {
		x.remove(c)
	}
	if x.otherIncarnations(restarted) || x.accepted(7, 1, 10) != nil {
		t.Fatal("removed connections still counted")
	}
	x.remove(restarted)
	if len(x.nodes) != 0 || len(x.incs) != 0 || len(x.inbound) != 0 {
		t.Fatalf("index not empty: %d %d %d", len(x.nodes), len(x.incs), len(x.inbound))
	}
}
