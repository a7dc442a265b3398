package engine

import (
	"context"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
)

// App is the application's part of a backend's loop.
//
// Step is called once per loop iteration, on the goroutine that owns the
// transport (see Backend.Run), with the backend's clock. It may post work
// requests, poll completion queues and touch anything else reachable from
// the transport; it must not block (the packets of this iteration wait for
// it). It returns done when the application has finished this Run, or an
// error, which ends the Run with that error.
type App interface {
	Step(now verbs.Time) (done bool, err error)
}

// AppFunc is a function as an App.
type AppFunc func(now verbs.Time) (done bool, err error)

// Step calls f.
func (f AppFunc) Step(now verbs.Time) (bool, error) { return f(now) }

// Backend drives one transport core over some medium.
//
// Ownership: after Attach the transport (and everything reachable from
// it: connections, queue pairs, completion queues, regions) is touched by
// the backend only inside Run, and there only on the loop's goroutine,
// where App.Step runs too. Between Runs the goroutine that calls Run owns
// it: Run's return is a happens-before edge both ways. Now, Stats and the
// address methods may be called from any goroutine.
type Backend interface {
	// Attach sets the transport the backend drives; call it once,
	// before Run.
	Attach(t verbs.Transport) error

	// Run runs the loop: each iteration calls app.Step, then runs the
	// transport's due timers, sends what it has ready (a burst) and
	// receives a burst. It returns nil when app.Step reports done, the
	// error app.Step or the medium returned, or ctx.Err() once ctx is
	// cancelled (checked every iteration).
	//
	// Idle iterations: udp waits in the kernel for a packet (it wakes
	// at once when one comes), at most Config.IdleWait (1 ms by
	// default) or until the transport's next deadline, so a Step that
	// waits on the wall clock (a timed run) is called again within that
	// limit; mempair jumps its virtual clock to the next event (and
	// fails with ErrStalled when there is none); dpdk polls (its
	// packets wake nothing) for idle_spin, inside its driver call for
	// up to idle_poll (5 µs by default) at a time between Steps, then
	// naps in the kernel, backing off up to max_idle_sleep (50 µs by
	// default), and parks, using no CPU, between Runs.
	Run(ctx context.Context, app App) error

	// Now is the transport's clock (the time Run gives App.Step).
	Now() verbs.Time

	// AddPeer names a peer by its data-path address (IPv4 and UDP port)
	// and returns the handle the transport uses for it.
	AddPeer(addr netip.AddrPort) (verbs.PeerHandle, error)
	// PeerIP is the IPv4 address of peer h (zero for an unknown handle).
	PeerIP(h verbs.PeerHandle) [4]byte
	// LocalIP is this end's IPv4 address.
	LocalIP() [4]byte
	// LocalAddr is this end's data-path address, as a peer names it in
	// AddPeer.
	LocalAddr() netip.AddrPort

	// SetCapture installs (nil: removes) a hook that sees every packet
	// sent and received, on the loop's goroutine; a backend that cannot
	// capture returns an error and installs nothing.
	SetCapture(c Capture) error

	// Stats is a copy of the backend's counters.
	Stats() Stats

	// Close releases what the backend holds (sockets, a shard). The
	// transport is left as it is.
	Close() error
}

// RegionAllocator is a Backend that can give memory its driver may read in
// place (the DPDK backend's zero-copy TX lends only its own memory). The
// application registers it as any buffer; free must run only after the
// backend is closed (it may wait for the driver). A nil b with a nil err
// means the backend would not read it in place (zero-copy off): the
// caller allocates its own.
type RegionAllocator interface {
	AllocRegion(n int) (b []byte, free func() error, err error)
}
