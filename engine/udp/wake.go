package udp

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/verbs"
)

// waker is Config.Wakeable's idle wait: the loop blocks in ppoll on the
// receive socket and an eventfd, and Wake writes the eventfd.
//
// Why not the netpoller: a read deadline under 1 ms sleeps 1 ms there
// (epoll_wait takes milliseconds), and ending the wait from another
// thread (a deadline in the past) readies the loop's goroutine through
// the Go scheduler, whose hand-off costs tens of microseconds on a busy
// host (the readied goroutine sits in the waking thread's run queue until
// another thread steals it). ppoll sleeps to the nanosecond and the
// kernel wakes the blocked thread directly.
//
// The contract between the loop and Wake (any thread): woken says a Wake
// came since the loop last looked; sleeping says the loop is in, or about
// to enter, ppoll. The loop sets sleeping and then looks at woken; Wake
// sets woken and then looks at sleeping, and writes the eventfd only when
// it is set. Both are sequentially consistent, so at least one of the two
// sees the other: a Wake is never lost, and a Wake while the loop is busy
// costs two atomic operations and no system call. The loop clears woken
// after each wait, since the App's step comes next and sees the work
// handed over before it. A write that lands after the loop woke for
// another reason leaves the eventfd readable: the next wait returns at
// once and drains it (one spare iteration).
type waker struct {
	efd      int // the eventfd; 0: not Wakeable
	sockFD   int
	woken    atomic.Bool
	sleeping atomic.Bool
	// drivenUntil: while the loop's clock is before it, Progress polls
	// the socket on another thread and the loop waits for Wake alone.
	drivenUntil atomic.Int64
	// sleepUntil: when the loop's current or last wait ends at the latest
	// (the loop's clock), for Progress to tell whether a deadline it set
	// needs a Wake.
	sleepUntil atomic.Int64
	fds        [2]unix.PollFd
	ts         unix.Timespec
	buf        [8]byte
}

// open creates the eventfd and notes the socket's descriptor (raw's, for
// the socket's life).
func (w *waker) open(raw syscall.RawConn) error {
	if err := raw.Control(func(fd uintptr) { w.sockFD = int(fd) }); err != nil {
		return fmt.Errorf("udp: wake: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("udp: wake: eventfd: %w", err)
	}
	w.efd = efd
	w.fds = [2]unix.PollFd{{Fd: int32(w.sockFD), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
	return nil
}

func (w *waker) close() {
	if w.efd > 0 {
		unix.Close(w.efd)
		w.efd = -1
	}
}

// wait blocks until a packet is readable, Wake is called or d has passed,
// and reports whether the socket may be readable (false: woken or timed
// out with nothing to read).
func (w *waker) wait(b *Backend, d time.Duration) bool {
	if !w.maySleep() {
		return false
	}
	fds := w.fds[:]
	if until := verbs.Time(w.drivenUntil.Load()); until > 0 {
		// Another thread polls the socket (Progress): wait for Wake
		// alone, until it stops.
		if left := time.Duration(until - b.Now()); left > 0 {
			fds = w.fds[1:]
			d = min(d, left)
		}
	}
	w.ts = unix.NsecToTimespec(d.Nanoseconds())
	w.fds[0].Revents, w.fds[1].Revents = 0, 0
	w.sleepUntil.Store(int64(b.Now().Add(d)))
	if b.owned {
		b.own.Unlock() // Progress may run a step while the loop sleeps
	}
	n, _ := unix.Ppoll(fds, &w.ts, nil) // EINTR: look again next Step
	if b.owned {
		b.own.Lock()
	}
	w.sleeping.Store(false)
	// The App runs after this wait, so the work of every Wake so far
	// will be seen: none of them needs another iteration.
	w.woken.Store(false)
	w.drainWake()
	return n > 0 && w.fds[0].Revents != 0
}

// maySleep sets sleeping unless a Wake came since the loop last looked
// (work was handed over since the App's step: the loop does it now, and
// maySleep reports false); the contract is the waker's.
func (w *waker) maySleep() bool {
	if w.woken.Swap(false) {
		return false
	}
	w.sleeping.Store(true)
	if w.woken.Load() {
		w.sleeping.Store(false)
		return false
	}
	return true
}

// drainWake resets the eventfd's counter (non-blocking) if the last ppoll
// saw it readable, and reports whether it did.
func (w *waker) drainWake() bool {
	if w.fds[1].Revents == 0 {
		return false
	}
	_, _ = unix.Read(w.efd, w.buf[:])
	return true
}

// stepAside waits, without the transport's ownership, while a polling
// thread drives it (Progress with a drive, or one that found the loop
// busy and claimed it): on Wake alone, until the drive passes (a drive
// renewed meanwhile extends the wait; each ppoll is bounded by d). It
// reports whether it waited and nothing woke it, so that the loop looks
// again before it runs a step; false (not driven, or Wake handed it
// work: a command, a post that was not left to the poller) lets the loop
// run one iteration, as after any wait. It does not take the ownership
// back between its ppolls: a driver's Progress must never find the loop
// busy only because it looked at the clock.
func (w *waker) stepAside(b *Backend, d time.Duration) bool {
	if verbs.Time(w.drivenUntil.Load()) <= b.Now() || !w.maySleep() {
		return false
	}
	// The poller runs the timers while it drives; should it stop, the
	// drive passes within its bound and the loop takes them back.
	b.own.Unlock()
	woken := false
	for !woken {
		left := time.Duration(verbs.Time(w.drivenUntil.Load()) - b.Now())
		if left <= 0 {
			break
		}
		wait := min(d, left)
		w.ts = unix.NsecToTimespec(wait.Nanoseconds())
		w.sleepUntil.Store(int64(b.Now().Add(wait)))
		w.fds[1].Revents = 0
		_, _ = unix.Ppoll(w.fds[1:], &w.ts, nil)
		woken = w.drainWake() || w.woken.Load()
	}
	b.own.Lock()
	w.sleeping.Store(false)
	w.woken.Store(false)
	return !woken
}

// Wake ends the loop's current or next idle wait at once, so that work
// another goroutine or thread handed to the App is run now rather than
// after the idle wait. Any goroutine or thread may call it, at any time;
// it does nothing unless Config.Wakeable was set.
func (b *Backend) Wake() {
	w := &b.wk
	if w.efd <= 0 {
		return
	}
	w.woken.Store(true)
	if w.sleeping.Load() {
		one := [8]byte{1}
		_, _ = unix.Write(w.efd, one[:])
	}
}
