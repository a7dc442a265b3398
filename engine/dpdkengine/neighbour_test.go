//go:build dpdk

package dpdkengine

import "testing"

// Sources learned from arriving packets are bounded by MaxLearnedPeers
// (spoofed addresses cannot fill the table); static neighbours and peers
// the application adds are not counted against it and always get a
// handle; refusals are counted; -1 learns nothing.
func TestLearnedPeersBounded(t *testing.T) {
	for _, c := range []struct{ max, want int }{{0, DefaultMaxLearnedPeers}, {3, 3}, {-1, 0}} {
		tab, err := newNeighTable([]Neighbour{{Peer: 1, IP: "10.0.0.2"}}, 1, c.max)
		if err != nil {
			t.Fatal(err)
		}
		n := newNeighbours(tab)
		learned := 0
		for i := 0; i < 1000; i++ {
			if _, ok := n.lookup(IPv4{192, 168, byte(i >> 8), byte(i)}, learnData); ok {
				learned++
			}
		}
		if learned != c.want || tab.refused.Load() != uint64(1000-c.want) {
			t.Fatalf("max %d: learned %d, refused %d; want %d", c.max, learned, tab.refused.Load(), c.want)
		}
		// The static neighbour is found, a told peer added, a learned one found again.
		if p, ok := n.lookup(IPv4{10, 0, 0, 2}, learnData); !ok || p != 1 {
			t.Fatalf("static neighbour: %d %v", p, ok)
		}
		if _, ok := n.lookup(IPv4{10, 9, 9, 9}, learnTold); !ok {
			t.Fatal("a told peer was refused")
		}
		if _, ok := n.lookup(IPv4{10, 9, 9, 9}, learnData); !ok {
			t.Fatal("a told peer's packet was refused")
		}
		if c.want > 0 {
			if _, ok := newNeighbours(tab).lookup(IPv4{192, 168, 0, 0}, learnData); !ok {
				t.Fatal("a learned peer was not found again")
			}
		}
	}
}
