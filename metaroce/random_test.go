package metaroce

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// idsOf connects n connections of a wire pair whose endpoints draw from
// seeds sa and sb (0: the default, seeded from the configuration) and
// returns A's connection ids, B's ids and the first PSN of every path of
// A's connections.
func idsOf(t *testing.T, sa, sb uint64, n int) (a, b []ConnID, psns []PSN) {
	t.Helper()
	cfg := Config{Paths: 4}
	w := newWirePair(t, cfg)
	if sa != 0 {
		ca, cb := cfg, cfg
		ca.Node, ca.Incarnation, ca.Rand = 1, 11, verbs.NewSeededRandom(sa)
		cb.Node, cb.Incarnation, cb.AcceptIncoming, cb.Rand = 2, 22, true, verbs.NewSeededRandom(sb)
		ea, err := NewEndpoint(ca)
		if err != nil {
			t.Fatal(err)
		}
		eb, err := NewEndpoint(cb)
		if err != nil {
			t.Fatal(err)
		}
		w.ep = [2]*Endpoint{ea, eb}
	}
	for range n {
		c, err := w.ep[0].Connect(w.now, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100 && !c.Established(); i++ {
			w.step()
		}
		acc, ok := w.ep[1].Accept()
		if !c.Established() || !ok {
			t.Fatalf("connection %d not set up", len(a))
		}
		if acc.remote != c.local || c.remote != acc.local {
			t.Fatalf("ids disagree: %#x/%#x vs %#x/%#x", c.local, c.remote, acc.local, acc.remote)
		}
		c.materialize()
		acc.materialize()
		for i := range c.tx {
			// Both ends derive the same first PSN for each direction.
			if acc.rx[i].sb.cum != c.tx[i].next || c.rx[i].sb.cum != acc.tx[i].next {
				t.Fatalf("path %d: first PSNs disagree", i)
			}
			psns = append(psns, c.tx[i].next, acc.tx[i].next)
		}
		a, b = append(a, c.local), append(b, acc.local)
	}
	return a, b, psns
}

// Connection ids and initial PSNs come from the endpoint's Random: they
// differ between seeds, follow no sequence, are not 0, and are the same
// again with the same seed (the default source is reproducible).
func TestIdentifiersRandom(t *testing.T) {
	a1, b1, p1 := idsOf(t, 5, 6, 16)
	a2, b2, p2 := idsOf(t, 7, 8, 16)
	a3, b3, p3 := idsOf(t, 5, 6, 16)
	d1, _, pd := idsOf(t, 0, 0, 16)
	d2, _, _ := idsOf(t, 0, 0, 16)
	same, seq, zero := 0, 0, 0
	for i := range a1 {
		if a1[i] == a2[i] || b1[i] == b2[i] {
			same++
		}
		if a1[i] != a3[i] || b1[i] != b3[i] || d1[i] != d2[i] {
			t.Fatalf("connection %d: the same seed gave other ids", i)
		}
		if i > 0 && (a1[i]-a1[i-1] == 1 || b1[i]-b1[i-1] == 1 || d1[i]-d1[i-1] == 1) {
			seq++
		}
		if a1[i] <= 16 || b1[i] <= 16 || d1[i] <= 16 {
			t.Fatalf("connection %d has a small id: %#x %#x %#x", i, a1[i], b1[i], d1[i])
		}
	}
	samePSN := 0
	for i := range p1 {
		if p1[i] == p2[i] {
			samePSN++
		}
		if p1[i] != p3[i] {
			t.Fatal("the same seed gave other PSNs")
		}
		if p1[i] == 0 || pd[i] == 0 {
			zero++
		}
	}
	if same+seq+samePSN+zero > 0 || len(p1) != 16*4*2 {
		t.Fatalf("of 16 connections: %d ids equal across seeds, %d sequential; of %d first PSNs %d equal across seeds, %d zero",
			same, seq, len(p1), samePSN, zero)
	}
}

// A path's next generation starts at its own first PSN, which both ends
// derive alike, and the receiver follows the sender's restart.
func TestGenerationFirstPSN(t *testing.T) {
	ta, tb := Token{0x12, 0x34}, Token{0x56, 0x78}
	var p txPath = newTxPath(0, 1, 0, 64, isnKey(&ta, &tb, 3))
	r := rxPath{isn: isnKey(&ta, &tb, 3)}
	r.restart(0)
	seen := map[PSN]bool{}
	for g := range 50 {
		if r.sb.cum != p.next || p.una != p.next || p.gen != uint16(g) {
			t.Fatalf("generation %d: receiver expects %d, sender starts at %d", g, r.sb.cum, p.next)
		}
		seen[p.next] = true
		p.restart()
		r.restart(p.gen)
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct first PSNs in 50 generations", len(seen))
	}
}
