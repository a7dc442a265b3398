package udp

import (
	"context"
	"errors"
	"github.com/metaroce/metaroce/verbs"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
)

// TestRunStepsApp: Run calls the App once per iteration with the
// backend's clock, stops when it is done, returns its error, and returns
// ctx's error when cancelled; an idle Run waits (IdleWait per iteration)
// instead of spinning.
func TestRunStepsApp(t *testing.T) {
	p := newPair(t, Config{IdleWait: 2 * time.Millisecond}, Config{})
	if err := p.b[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) { return true, nil })); err == nil {
		t.Fatal("Run before Attach: no error")
	}
	if err := p.b[0].Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	var calls int
	var last verbs.Time
	start := time.Now()
	err := p.b[0].Run(context.Background(), engine.AppFunc(func(now verbs.Time) (bool, error) {
		if now < last {
			t.Errorf("clock went back: %d after %d", now, last)
		}
		last = now
		calls++
		return calls == 10, nil
	}))
	if err != nil || calls != 10 {
		t.Fatalf("Run: %v after %d calls, want nil after 10", err, calls)
	}
	// Nine idle iterations of 2 ms each: the loop slept, it did not spin.
	if d := time.Since(start); d < 9*2*time.Millisecond {
		t.Errorf("10 idle iterations took %v, want >= 18ms (IdleWait 2ms)", d)
	}
	boom := errors.New("boom")
	if err := p.b[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) { return false, boom })); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want the App's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = p.b[0].Run(ctx, engine.AppFunc(func(verbs.Time) (bool, error) {
		calls++
		if calls == 3 {
			cancel()
		}
		return false, nil
	}))
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Fatalf("Run: %v after %d calls, want context.Canceled after 3", err, calls)
	}
}

// TestSocketStatsPortsShared: with one send socket allowed, the second
// entropy's packets share it and are counted.
func TestSocketStatsPortsShared(t *testing.T) {
	p := newPair(t, Config{MaxSourcePorts: 1}, Config{})
	a := &flood{entropies: 2}
	if err := p.b[0].Attach(a); err != nil {
		t.Fatal(err)
	}
	if err := p.b[1].Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b[0].Step(0); err != nil {
		t.Fatal(err)
	}
	sent := p.b[0].Stats().TxPackets
	if s := p.b[0].SocketStats(); sent == 0 || s.PortsShared != sent/2 {
		t.Fatalf("sent %d over 2 entropies with 1 socket: %d shared, want %d", sent, s.PortsShared, sent/2)
	}
}
