//go:build cgo

package main

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/internal/profileload"
	"github.com/metaroce/metaroce/verbs"
)

// idleEng opens an engine on loopback (its loop not running: the test
// calls step itself, as the loop would) with nqp QPs and as many CQs, none
// connected and none with work.
func idleEng(t testing.TB, nqp int) *eng {
	t.Helper()
	l, err := profileload.Load("")
	if err != nil {
		t.Fatal(err)
	}
	e := endpoint{ip: netip.MustParseAddr("127.0.0.1"), cfg: l.Config, transport: l.Config.Transport, mtu: l.Config.MTU()}
	g, err := open(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.be.Close() })
	for i := 0; i < nqp; i++ {
		h := g.handle()
		c := &cq{core: verbs.NewCompletionQueue(16), buf: make([]verbs.WorkCompletion, 64), handle: h}
		c.core.OnReady(func() { g.markCQ(c) })
		g.cqs[h] = c
		h = g.handle()
		g.qps[h] = &qp{handle: h, idx: i, scq: c, rcq: c, sqDepth: 16, slots: make([]sendSlot, 17)}
	}
	return g
}

// TestStepVisitsOnlyBusyQPs: a step's work does not grow with the QPs and
// CQs a program holds: it visits the QPs with posts and the CQs with
// completions (eng.posted, eng.readyCQs), and allocates nothing. Before, it
// walked every QP twice and every CQ three times (maps) at each loop
// iteration.
func TestStepVisitsOnlyBusyQPs(t *testing.T) {
	g := idleEng(t, 200)
	if _, err := g.step(0); err != nil {
		t.Fatal(err)
	}
	if len(g.posted) != 0 || len(g.readyCQs) != 0 {
		t.Fatalf("idle engine lists %d QPs and %d CQs", len(g.posted), len(g.readyCQs))
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = g.step(0) }); a != 0 {
		t.Fatalf("an idle step allocates %v times", a)
	}
	// A post to one unconnected QP lists it (once, however often it is
	// marked); the step leaves its work for the connection (attach) and
	// unlists it. No WR is needed: the listing is what is checked.
	var q *qp
	for _, x := range g.qps {
		q = x
		break
	}
	g.mu.Lock()
	g.markPosted(q)
	g.markPosted(q)
	g.mu.Unlock()
	if len(g.posted) != 1 {
		t.Fatalf("posted %d, want 1", len(g.posted))
	}
	if _, err := g.step(0); err != nil {
		t.Fatal(err)
	}
	if len(g.posted) != 0 || q.listed {
		t.Fatal("a step left the QP listed")
	}
}

// BenchmarkIdleStep: the cost of one loop iteration's application step
// with n QPs and n CQs, none busy (constant in n).
func BenchmarkIdleStep(b *testing.B) {
	for _, n := range []int{1, 16, 200} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			g := idleEng(b, n)
			b.ReportAllocs()
			for b.Loop() {
				_, _ = g.step(0)
			}
		})
	}
}
