package udp

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// stepTook runs one Step with wait on b and returns how long it took and
// whether it moved anything.
func stepTook(t *testing.T, b *Backend, wait time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	moved, err := b.Step(wait)
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start), moved
}

// TestWakeEndsIdleWait: with Config.Wakeable an idle Step waits as long
// as asked (ppoll, not the netpoller's whole milliseconds), a Wake before
// it or during it ends it at once, a Wake is used up by the wait it ends,
// and an arriving packet ends the wait too.
func TestWakeEndsIdleWait(t *testing.T) {
	p := newPair(t, Config{Wakeable: true}, Config{})
	b := p.b[0]
	if err := b.Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	if d, _ := stepTook(t, b, 30*time.Millisecond); d < 25*time.Millisecond {
		t.Fatalf("an idle Step(30ms) returned after %v: it did not wait", d)
	}
	b.Wake()
	if d, moved := stepTook(t, b, time.Second); d > 200*time.Millisecond || moved {
		t.Fatalf("Step(1s) after Wake: %v (moved %v), want at once", d, moved)
	}
	if d, _ := stepTook(t, b, 30*time.Millisecond); d < 25*time.Millisecond {
		t.Fatalf("a second Step(30ms) after one Wake returned after %v: the Wake was not used up", d)
	}
	// A ppoll interrupted by a signal (the Go runtime preempts with
	// SIGURG) ends a Step early by design, "look again next Step": so
	// the two phases below step until their event has ended a wait, and
	// bound the whole phase instead of one Step. Without that, a Step
	// cut short before the Wake left the Wake pending, and it ended the
	// packet phase's first Step at once (seen in CI: 62µs, nothing read);
	// the packet phase now steps on past it.
	var woke atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		woke.Store(true)
		b.Wake()
	}()
	start := time.Now()
	for !woke.Load() && time.Since(start) < time.Second {
		stepTook(t, b, time.Second)
	}
	if d := time.Since(start); d > 500*time.Millisecond || d < 15*time.Millisecond {
		t.Fatalf("Steps(1s) with a Wake 20 ms in: %v, want about 20 ms", d)
	}
	// A datagram from the peer's IP ends the wait and is read.
	peer := p.b[1].LocalAddr().Addr()
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: peer.AsSlice()}, net.UDPAddrFromAddrPort(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Write([]byte("x"))
	}()
	start, moved := time.Now(), false
	for !moved && time.Since(start) < time.Second {
		_, moved = stepTook(t, b, time.Second)
	}
	if d := time.Since(start); d > 500*time.Millisecond || !moved {
		t.Fatalf("Steps(1s) with a packet 20 ms in: %v, moved %v; want about 20 ms, moved", d, moved)
	}
	if got := b.Stats().RxPackets; got != 1 {
		t.Fatalf("RxPackets = %d, want the 1 datagram", got)
	}
}

// TestWakeNotWakeable: without Config.Wakeable, Wake does nothing and the
// idle wait is the netpoller's.
func TestWakeNotWakeable(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	b := p.b[0]
	if err := b.Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	b.Wake()
	if d, _ := stepTook(t, b, 30*time.Millisecond); d < 25*time.Millisecond {
		t.Fatalf("Step(30ms) after Wake on a backend not Wakeable: %v, want the whole wait", d)
	}
}

// TestWakeAllocatesNothing: a Wake and the wait it ends allocate nothing
// (the verbs library wakes the loop at every post).
func TestWakeAllocatesNothing(t *testing.T) {
	p := newPair(t, Config{Wakeable: true}, Config{})
	b := p.b[0]
	if err := b.Attach(&recorder{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	allocs := testing.AllocsPerRun(200, func() {
		b.Wake()
		if _, err := b.Step(time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n++
	})
	if n < 200 || allocs != 0 {
		t.Fatalf("%v allocations per Wake and Step over %d runs, want 0", allocs, n)
	}
}
