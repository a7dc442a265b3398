package udp

import (
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/verbs"
)

// Progress runs the transport on the calling thread if Run's loop
// (Config.Wakeable) is asleep, and reports whether it did and whether
// that moved a packet (sent or received one); when the loop is busy it
// runs nothing (the caller then hands its work over with Wake), but a
// drive > 0 still claims the transport: the loop steps aside at its next
// iteration (Run), so that the caller's next Progress runs. Any goroutine
// or thread may call it before Close.
//
//   - drive 0 (a post): one App step and one send pass, so that the work
//     just handed to the App leaves at once. No receive, no timers.
//   - drive > 0 (a poll that found nothing): one App step, one whole Step
//     without waiting (timers, sends, a receive) and another App step if
//     that moved anything, as Run would; and the calling thread takes
//     over watching the socket for drive: the loop's next waits are on
//     Wake alone (the one under way still watches the socket), and it
//     reads the socket itself again once drive has passed.
//
// Why: a verbs program's threads post and poll, and the native path's
// application runs inside the loop. Handed to a sleeping loop, a post
// costs an eventfd write and a thread wake-up before its packet leaves,
// and an arriving packet a wake-up of the loop and then one of the
// polling thread before the program sees it: on a busy host, context
// switches of several microseconds each, which were most of the library's
// latency over the native path. Run by the posting and polling thread,
// the transport moves with no thread woken on the way. It is still owned
// by one thread at a time: the loop holds the ownership except while it
// sleeps, and Progress takes it only if it is free (it never waits).
//
// A deadline a post's step moves earlier than the loop's planned wake-up
// wakes the loop (Wake), unless a polling thread drives, which runs the
// timers itself while it polls.
//
// Why the claim: while a stream runs, the loop always has work and never
// sleeps, so a poller that only ran the transport when the loop slept
// never ran it: the loop drove, and every completion it pushed woke the
// napping poller, two busy threads handing off on each completion. With
// one CPU per process (ib_write_bw pinned) that was 0.55 to 0.78 of the
// native path's bandwidth, whose application runs in the loop's thread.
// Claimed, the poller is the one thread that runs the transport while it
// polls, as the native loop is.
//
// It returns ran false before Run has started and after Close.
func (b *Backend) Progress(app engine.App, drive time.Duration) (ran, moved bool, err error) {
	if !b.own.TryLock() {
		if drive > 0 && b.wk.efd > 0 {
			b.wk.drivenUntil.Store(int64(b.Now().Add(drive)))
		}
		return false, false, nil
	}
	defer b.own.Unlock()
	if !b.owned || b.closed {
		return false, false, nil
	}
	now := b.Now()
	if _, err := app.Step(now); err != nil {
		return true, false, err
	}
	if drive == 0 {
		sent, err := b.send(now)
		if now >= verbs.Time(b.wk.drivenUntil.Load()) && b.t.NextDeadline() < verbs.Time(b.wk.sleepUntil.Load()) {
			b.Wake()
		}
		return true, sent > 0, err
	}
	b.wk.drivenUntil.Store(int64(now.Add(drive)))
	moved, err = b.Step(0)
	if moved && err == nil {
		// What arrived may need the App at once (a completion to push).
		_, err = app.Step(b.Now())
	}
	return true, moved, err
}

// Driven reports whether a thread that polls drives the transport now: a
// Progress with a drive ran within the last drive, so that thread runs
// the App again at its next poll that finds nothing, and the loop waits
// for Wake alone until the drive has passed. Any goroutine or thread may
// call it; it is false unless Config.Wakeable was set.
//
// Why: the verbs library's posts run the App and a send pass each
// (Progress with drive 0) when the loop sleeps, one send system call per
// work request. A program that posts a burst and then polls (perftest's
// ib_write_bw, 100 WRs between completions) is better served by leaving
// the burst to its own next poll, which takes all of it in one App step
// and sends it in batches of Burst, as the native path's loop does. Work
// left that way waits at most until the drive passes: then the loop runs
// the App itself.
func (b *Backend) Driven() bool {
	return b.wk.efd > 0 && b.Now() < verbs.Time(b.wk.drivenUntil.Load())
}

// ExtendDrive keeps a drive going for at least d from now, or starts one
// if none is under way: the thread that polls is still at work in the
// program, e.g. posting the burst that its next poll will send. Any
// goroutine or thread may call it.
//
// Why: perftest's ib_write_bw posts 100 work requests between two polls,
// one ibv_post_send each, which on a loaded core can outlast a drive; the
// loop then took the transport back in the middle of a stream, and the
// next poll had to claim it again (one hand-off between two threads per
// burst).
//
// Why it starts one: the verbs library leaves a post to the posting
// thread's next poll whenever that thread polled within its spin, which
// is longer than a drive. With the drive passed the loop sleeps in its own
// wait, which nothing ended before its idle wait (1 ms) if the program
// then stopped polling. A drive started here wakes it (Wake), and the
// loop then steps aside until the drive passes, d at most, and runs the
// App, which takes the work, unless the poller's next Progress took it
// first.
func (b *Backend) ExtendDrive(d time.Duration) {
	if b.wk.efd <= 0 {
		return
	}
	now := b.Now()
	until := verbs.Time(b.wk.drivenUntil.Load())
	if until >= now.Add(d) {
		return
	}
	// A Progress storing its own drive meanwhile wins or loses the race
	// by a few nanoseconds either way: both are "now + a drive".
	b.wk.drivenUntil.Store(int64(now.Add(d)))
	if now >= until {
		b.Wake() // no drive was under way: the loop may be asleep in its own wait
	}
}

// SendNow sends what the transport has ready, at once, on the caller's
// goroutine, which must own the transport: an App's Step run by Run or by
// Progress. The verbs library calls it before it runs a command (destroy
// a QP, close the device): an ACK the last receive queued leaves first.
// A program may exit as soon as it has seen its last completion
// (ibv_rc_pingpong does), and when its thread ran the transport that
// ACK waited for the next send pass, which came after the destroy: over
// rocev2 the peer's last SEND failed with IBV_WC_RETRY_EXC_ERR.
func (b *Backend) SendNow() error {
	_, err := b.send(b.Now())
	return err
}
