package main

import (
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// stuckRunner has work outstanding whose completions never come (a peer
// that froze, a path an attacker stalled).
type stuckRunner struct{ stopped, pumped bool }

func (r *stuckRunner) pump()                     { r.pumped = true }
func (r *stuckRunner) onWC(verbs.WorkCompletion) {}
func (r *stuckRunner) finished() bool            { return false }
func (r *stuckRunner) result() perfResult        { return perfResult{} }
func (r *stuckRunner) stop()                     { r.stopped = true }
func (r *stuckRunner) failure() error            { return nil }

// TestStoppedRunExitsPromptly: a run stopped by SIGINT/SIGTERM whose
// completions never come returns within stopGrace, as interrupted.
func TestStoppedRunExitsPromptly(t *testing.T) {
	defer func(d time.Duration) { stopGrace = d }(stopGrace)
	stopGrace = 300 * time.Millisecond
	p, err := mempair.New(mr.Config{}, mr.Config{}, memlink.Config{Delay: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Connect(1e9); err != nil {
		t.Fatal(err)
	}
	n := &node{be: p.End(0), cq: verbs.NewCompletionQueue(4), wcs: make([]verbs.WorkCompletion, 4)}
	r := &stuckRunner{}
	stopAt := time.Now().Add(100 * time.Millisecond)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := drive(n, r, func() bool { return time.Now().After(stopAt) }, nil, "write_bw")
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, errInterrupted) {
			t.Fatalf("drive: %v, want interrupted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped run did not return within 10 s")
	}
	if took := time.Since(start); took > 5*time.Second || !r.stopped || !r.pumped {
		t.Fatalf("returned after %v (stopped %v, pumped %v)", took, r.stopped, r.pumped)
	}
}
