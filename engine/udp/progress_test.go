package udp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/verbs"
)

// owed is a transport that sends one packet per unit owed and counts what
// it receives; atomics, as the test reads them from another goroutine.
type owed struct{ owe, got atomic.Int64 }

func (o *owed) Receive(verbs.Time, []byte, verbs.RxMeta) { o.got.Add(1) }
func (o *owed) NextPacket(_ verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if o.owe.Load() == 0 {
		return verbs.TxMeta{}, false
	}
	o.owe.Add(-1)
	buf[0] = 3
	return verbs.TxMeta{Len: 32, TxRoute: verbs.TxRoute{Entropy: 40000}}, true
}
func (o *owed) NextDeadline() verbs.Time { return verbs.Never }
func (o *owed) OnTimer(verbs.Time)       {}
func (o *owed) MaxPacketLen() int        { return 2048 }

// stepUntil steps b alone (the test goroutine owns it) until cond holds
// or limit passes.
func stepUntil(t *testing.T, b *Backend, limit time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("condition not reached within %v", limit)
		}
		if _, err := b.Step(time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond every millisecond for up to limit.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// runLoop runs b's loop with app on a goroutine of its own; stop ends it
// (cancel, then Wake, which ends a wait under way) and checks that Run
// returned context.Canceled.
func runLoop(t *testing.T, b *Backend, app engine.App) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, app) }()
	return func() {
		cancel()
		b.Wake()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	}
}

// TestProgress: Progress runs nothing before Run; while Run sleeps it runs
// the App and sends on the caller's goroutine without waking the loop;
// with a drive, the packets that arrive are the caller's to read (from
// the loop's next wait on) until the drive has passed, and then the loop's again; while the loop is busy
// it does nothing.
func TestProgress(t *testing.T) {
	p := newPair(t, Config{Wakeable: true, IdleWait: time.Second}, Config{})
	b, peer := p.b[0], p.b[1]
	tr, rx := &owed{}, &owed{}
	if err := b.Attach(tr); err != nil {
		t.Fatal(err)
	}
	if err := peer.Attach(rx); err != nil {
		t.Fatal(err)
	}
	var progSteps atomic.Int64
	prog := engine.AppFunc(func(verbs.Time) (bool, error) { progSteps.Add(1); return false, nil })
	if ran, _, err := b.Progress(prog, 0); ran || err != nil {
		t.Fatalf("Progress before Run: %v, %v; want false", ran, err)
	}
	if b.Driven() {
		t.Fatal("Driven before any drive")
	}
	var loopSteps atomic.Int64
	hold := make(chan struct{})
	var holding atomic.Bool
	defer runLoop(t, b, engine.AppFunc(func(verbs.Time) (bool, error) {
		loopSteps.Add(1)
		if holding.Load() {
			<-hold
		}
		return false, nil
	}))()
	asleep := func() bool { return b.wk.sleeping.Load() }
	if !waitFor(2*time.Second, asleep) {
		t.Fatal("the loop never went to sleep")
	}
	// A post: the packet leaves from this goroutine; the loop sleeps on.
	before := loopSteps.Load()
	tr.owe.Add(1)
	if ran, _, err := b.Progress(prog, 0); !ran || err != nil {
		t.Fatalf("Progress while the loop sleeps: %v, %v; want true", ran, err)
	}
	if progSteps.Load() != 1 || tr.owe.Load() != 0 {
		t.Fatalf("Progress ran %d App steps and left %d packets owed, want 1 and 0", progSteps.Load(), tr.owe.Load())
	}
	stepUntil(t, peer, time.Second, func() bool { return rx.got.Load() == 1 })
	if n := loopSteps.Load() - before; n != 0 {
		t.Fatalf("the loop ran %d steps for a post Progress sent, want 0", n)
	}
	// A drive: the peer's packet is read by the driving caller, not the loop.
	if b.Driven() {
		t.Fatal("Driven after a post's Progress (no drive)")
	}
	if ran, _, _ := b.Progress(prog, 300*time.Millisecond); !ran {
		t.Fatal("Progress with a drive did not run")
	}
	if !b.Driven() {
		t.Fatal("not Driven during a drive")
	}
	// The wait under way still watches the socket; the next ones do not.
	b.Wake()
	time.Sleep(20 * time.Millisecond)
	if !waitFor(time.Second, asleep) {
		t.Fatal("the loop did not sleep again")
	}
	rx.owe.Add(1)
	stepUntil(t, peer, time.Second, func() bool { return rx.owe.Load() == 0 }) // the peer sent it
	time.Sleep(50 * time.Millisecond)
	if tr.got.Load() != 0 {
		t.Fatal("the loop read a packet while another thread drove")
	}
	if !waitFor(time.Second, func() bool { b.Progress(prog, 300*time.Millisecond); return tr.got.Load() == 1 }) {
		t.Fatal("the driving Progress never read the packet")
	}
	// The drive passes: the loop reads the socket again.
	time.Sleep(350 * time.Millisecond)
	if b.Driven() {
		t.Fatal("still Driven after the drive passed")
	}
	rx.owe.Add(1)
	stepUntil(t, peer, time.Second, func() bool { return rx.owe.Load() == 0 })
	if !waitFor(2*time.Second, func() bool { return tr.got.Load() == 2 }) {
		t.Fatal("after the drive the loop did not read the next packet")
	}
	// A busy loop: Progress does nothing.
	holding.Store(true)
	b.Wake()
	if !waitFor(2*time.Second, func() bool { return !asleep() && loopSteps.Load() > before }) {
		t.Fatal("the loop did not wake")
	}
	time.Sleep(10 * time.Millisecond)
	if ran, _, _ := b.Progress(prog, 0); ran {
		t.Fatal("Progress ran while the loop was busy")
	}
	holding.Store(false)
	close(hold)
}

// TestSendNow: SendNow sends what became ready (an echo of a packet just
// received) at once, not at the next Step.
func TestSendNow(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	b, peer := p.b[0], p.b[1]
	e, rx := &echo{}, &owed{}
	if err := b.Attach(e); err != nil {
		t.Fatal(err)
	}
	if err := peer.Attach(rx); err != nil {
		t.Fatal(err)
	}
	rx.owe.Add(1)
	stepUntil(t, peer, time.Second, func() bool { return rx.owe.Load() == 0 })
	stepUntil(t, b, time.Second, func() bool { return b.Stats().RxPackets == 1 })
	if got := b.Stats().TxPackets; got != 0 {
		t.Fatalf("%d packets sent by the Step that received, want 0 (the echo waits for the next)", got)
	}
	if err := b.SendNow(); err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().TxPackets; got != 1 {
		t.Fatalf("SendNow sent %d packets, want the 1 echo", got)
	}
}

// TestProgressClaimsBusyLoop: a loop that always has packets to send never
// sleeps, so a poller that ran the transport only while the loop slept
// would never run it. A drive that finds the loop busy claims it instead:
// the loop steps aside at its next iteration, the caller's Progress runs
// (and reports the packets it moved), the loop runs no step of its own
// while the caller keeps driving, and takes the transport back once the
// drive has passed.
func TestProgressClaimsBusyLoop(t *testing.T) {
	p := newPair(t, Config{Wakeable: true, IdleWait: 10 * time.Millisecond}, Config{})
	b, peer := p.b[0], p.b[1]
	tr := &owed{}
	if err := b.Attach(tr); err != nil {
		t.Fatal(err)
	}
	if err := peer.Attach(&owed{}); err != nil {
		t.Fatal(err)
	}
	var loopSteps, progSteps atomic.Int64
	prog := engine.AppFunc(func(verbs.Time) (bool, error) { progSteps.Add(1); return false, nil })
	stop := runLoop(t, b, engine.AppFunc(func(verbs.Time) (bool, error) { loopSteps.Add(1); return false, nil }))
	defer func() {
		tr.owe.Store(0) // first, so that the loop can sleep and see the cancel
		stop()
	}()
	tr.owe.Store(1 << 40) // the loop sends without end: it never sleeps
	if !waitFor(2*time.Second, func() bool { return loopSteps.Load() > 100 }) {
		t.Fatal("the loop is not stepping")
	}
	const drive = 300 * time.Millisecond
	claimed := false
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		ran, _, _ := b.Progress(prog, drive)
		if !ran {
			claimed = true // found the loop busy: the claim is made
			continue
		}
		break
	}
	if !claimed {
		t.Fatal("Progress never found the loop busy: the test checked nothing")
	}
	ran, moved, err := b.Progress(prog, drive)
	if !ran || !moved || err != nil {
		t.Fatalf("Progress after the claim: ran %v moved %v err %v, want a step that sent", ran, moved, err)
	}
	// While this goroutine drives, the loop runs no step of its own.
	before, driven := loopSteps.Load(), 0
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); driven++ {
		if ran, _, _ := b.Progress(prog, drive); !ran {
			t.Fatal("the loop took the transport back during the drive")
		}
	}
	if n := loopSteps.Load() - before; n != 0 || driven < 10 {
		t.Fatalf("the loop ran %d steps during %d driving Progress calls, want 0 and >= 10", n, driven)
	}
	// The drive passes: the loop runs again.
	time.Sleep(drive + 50*time.Millisecond)
	if b.Driven() {
		t.Fatal("still Driven after the drive passed")
	}
	before = loopSteps.Load()
	if !waitFor(2*time.Second, func() bool { return loopSteps.Load() > before+10 }) {
		t.Fatal("the loop did not take the transport back")
	}
}

// TestExtendDriveStartsOne: with no drive under way, ExtendDrive starts
// one and wakes the loop asleep in its own wait (Config.IdleWait 1 s, the
// most: the test catches the loop within a millisecond of falling asleep),
// which steps aside until the drive (50 ms) passes and then runs the App:
// within 500 ms, where the loop left asleep would have slept for 1 s. With
// a drive under way it only moves the drive's end, and the loop sleeps on.
func TestExtendDriveStartsOne(t *testing.T) {
	p := newPair(t, Config{Wakeable: true, IdleWait: time.Second}, Config{})
	b := p.b[0]
	if err := b.Attach(&owed{}); err != nil {
		t.Fatal(err)
	}
	var loopSteps atomic.Int64
	defer runLoop(t, b, engine.AppFunc(func(verbs.Time) (bool, error) { loopSteps.Add(1); return false, nil }))()
	asleep := func() bool { return b.wk.sleeping.Load() }
	if !waitFor(2*time.Second, asleep) {
		t.Fatal("the loop never went to sleep")
	}
	before := loopSteps.Load()
	start := time.Now()
	b.ExtendDrive(50 * time.Millisecond)
	if !b.Driven() {
		t.Fatal("ExtendDrive with no drive under way started none")
	}
	if !waitFor(500*time.Millisecond, func() bool { return loopSteps.Load() > before }) {
		t.Fatal("the loop slept on: a post left to a drive ExtendDrive started would wait out the idle wait")
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("the loop ran the App %v after the drive started, before it passed (50 ms)", took)
	}
	// Under way: the end moves, and nothing wakes the loop.
	b.ExtendDrive(300 * time.Millisecond)
	if !waitFor(time.Second, asleep) {
		t.Fatal("the loop did not step aside")
	}
	mid := loopSteps.Load()
	until := b.wk.drivenUntil.Load()
	time.Sleep(5 * time.Millisecond)
	b.ExtendDrive(300 * time.Millisecond)
	if b.wk.drivenUntil.Load() <= until {
		t.Fatal("ExtendDrive did not move the end of the drive under way")
	}
	time.Sleep(20 * time.Millisecond)
	if n := loopSteps.Load() - mid; n != 0 {
		t.Fatalf("the loop ran %d steps while stepped aside, want 0", n)
	}
}
