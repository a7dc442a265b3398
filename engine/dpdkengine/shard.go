//go:build dpdk

package dpdkengine

import (
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
)

// shardIO is where a shard's bursts come from and go to: a port's queues
// directly, or rte_rings fed by a C lcore loop (package lcore).
type shardIO interface {
	// rx fills out with frames received on port i; the shard owns them.
	rx(i int, out []*dpdk.Mbuf) int
	// tx hands frames to port i and returns how many were taken; the
	// shard keeps pkts[n:].
	tx(i int, pkts []*dpdk.Mbuf) int
	// io is one iteration's driver work on port i: transmit tx (the
	// shard keeps tx[Sent:]), free frees (the shard's, whatever their
	// port), receive into rx; with spin > 0 (TSC cycles) it may wait
	// for a frame or wake (dpdk.PortID.IO). calls is the number of cgo
	// calls it made.
	io(i int, tx, frees, rx []*dpdk.Mbuf, spin uint64, wake *dpdk.Word) (r dpdk.IOResult, calls int)
	// canWait reports whether io's spin is honoured (else it polls once).
	canWait() bool
}

// directIO: the shard owns queue q of every port (rx from every queue of
// the port, so frames other local senders put on extra queues of the peer
// arrive too).
type directIO struct {
	ports []*port
	q     uint16
}

func (d *directIO) rx(i int, out []*dpdk.Mbuf) int {
	p := d.ports[i]
	n := 0
	for q := 0; q < p.queues && n < len(out); q++ {
		n += p.id.RxBurst(uint16(q), out[n:])
	}
	return n
}

func (d *directIO) tx(i int, pkts []*dpdk.Mbuf) int { return d.ports[i].id.TxBurst(d.q, pkts) }

func (d *directIO) io(i int, tx, frees, rx []*dpdk.Mbuf, spin uint64, wake *dpdk.Word) (dpdk.IOResult, int) {
	p := d.ports[i]
	return p.id.IO(d.q, tx, frees, uint16(p.queues), rx, spin, wake), 1
}

func (d *directIO) canWait() bool { return true }

// Shard runs one transport core over the engine's ports on its own
// goroutine, locked to an OS thread registered with the EAL. Everything
// reachable from the transport (endpoint, connections, queue pairs,
// completion queues, memory regions) belongs to that goroutine once the
// shard runs: other goroutines reach it only through Do, or run their
// application on the shard's loop with RunApp (app.go).
type Shard struct {
	e        *Engine
	tr       verbs.Transport
	io       shardIO
	ports    []*port
	neigh    *neighbours
	imp      *impairer
	burst    int
	ackFlush int // Config.AckFlush: packets of a burst before flushMidBurst (-1: never)
	maxLen   int

	// Burst arrays live in C memory (dpdk.NewMbufArray) and never grow
	// past their capacity.
	rxb   []*dpdk.Mbuf
	frees []*dpdk.Mbuf
	spare []*dpdk.Mbuf   // allocated, not yet used for tx
	pend  [][]*dpdk.Mbuf // per port: built, not yet taken by the queue (cap 4 bursts)
	hdr   []Header       // per port: our side of the headers
	dest  []txDest       // per port: the headers of the last destination sent to
	ours  []Ours         // per port: what a frame must be addressed to
	index int            // shard number: it listens on UDP port UDPPort+index

	cmdMu   sync.Mutex
	cmds    []cmd
	cmdFlag atomic.Bool
	wake    chan struct{}
	// kick (C memory) is set by Do and Kick and cleared just before the
	// commands and the application's step run: an idle shard waiting
	// for frames inside its driver call (dpdk.PortID.IO) stops waiting
	// when it is set.
	kick *dpdk.Word

	// rxDone holds the frames received and consumed in this iteration;
	// the next iteration's driver call frees them (C memory, capacity a
	// burst per port). tscNs converts the driver call's TSC cycles to ns.
	rxDone []*dpdk.Mbuf
	tscNs  float64
	// rxFull: a port's receive burst in the last poll came back full,
	// so more frames may be waiting (catchUp).
	rxFull bool
	// checked is when the loop last looked for due timers (catchUp).
	checked verbs.Time

	// The application's loop (app.go): app is stepped once per
	// iteration while a RunApp is in progress (shard goroutine only);
	// appDone (capacity 1) carries how it ended; inRun admits one RunApp
	// at a time. A held shard (Engine.Backend) runs only while it has an
	// app: between RunApps it is parked and its transport belongs to the
	// caller.
	app     engine.App
	appDone chan error
	inRun   atomic.Bool
	held    bool

	// pub is the copy of c that Stats reads (pubMu), refreshed every
	// publishEvery, when an app ends and when the shard parks or stops.
	pubMu   sync.Mutex
	pub     Counters
	lastPub verbs.Time

	stop atomic.Bool
	done chan struct{}
	err  error

	epoch time.Time
	c     Counters
	sw    stopwatch

	// The two halves of a burst (timesplit.go): frames parsed and queued
	// for the core (rxq), packets the core wrote and their metadata
	// (built, metas) waiting for headers. Capacity one burst each.
	rxq   []rxItem
	rxqN  int // packets in rxq (a coalesced frame counts all it holds)
	built []*dpdk.Mbuf
	metas []verbs.TxMeta

	// Zero-copy TX (zerocopy.go): nil ext when off. scats[k] says how
	// built[k] was made (Payload nil: whole, in the mbuf).
	ext   *mempool.ExtTX
	scat  scatterer
	zcMin int
	zcOn  bool // ext was set up (ext is nil again after the shard stops)
	scats []metaroce.Scatter

	// Coalescing (coalesce.go): nil coal when off.
	coal     engine.Coalescer
	coalesce int
	weigh    func([]byte) int // packets in a received datagram; nil: 1 each
}

// txDest is a port's last data destination: the peer the core named, the
// neighbour table's entry for its next hop when the template was built,
// and the template (frame.go). A frame to the same peer whose next hop's
// entry is unchanged takes the template as it is: addresses and gateways
// never change, so the MAC is all that can.
type txDest struct {
	ok   bool
	peer verbs.PeerHandle
	hop  verbs.PeerHandle
	mac  uint64 // the hop's neighTable.mac value (macKnown set)
	tpl  HeaderTemplate
}

// rxItem is a parsed payload waiting for the core's Receive; it aliases
// an mbuf the shard frees after the core has seen it.
type rxItem struct {
	payload []byte
	meta    verbs.RxMeta
}

type cmd struct {
	fn   func(now verbs.Time)
	done chan struct{}
}

func newShard(e *Engine, tr verbs.Transport, io shardIO, index int) (*Shard, error) {
	cfg := e.cfg
	neigh := newNeighbours(e.neigh)
	s := &Shard{e: e, tr: tr, io: io, ports: e.ports, neigh: neigh, imp: newImpairer(cfg.Impair),
		burst: cfg.Burst, ackFlush: cfg.AckFlush, maxLen: tr.MaxPacketLen(),
		rxb: dpdk.NewMbufArray(cfg.Burst), frees: dpdk.NewMbufArray(cfg.Burst)[:0],
		spare: dpdk.NewMbufArray(cfg.Burst)[:0], rxDone: dpdk.NewMbufArray(cfg.Burst * len(e.ports))[:0],
		kick: dpdk.NewWord(), tscNs: 1e9 / float64(max(dpdk.TSCHz(), 1)),
		wake: make(chan struct{}, 1), done: make(chan struct{}), epoch: time.Now(), index: index,
		appDone: make(chan error, 1),
		rxq:     make([]rxItem, 0, cfg.Burst), built: make([]*dpdk.Mbuf, 0, cfg.Burst), metas: make([]verbs.TxMeta, 0, cfg.Burst)}
	if room := cfg.DataRoom - 128; HdrLen+s.maxLen > room {
		return nil, fmt.Errorf("dpdk engine: the transport's packets (%d bytes + %d of headers) do not fit the mbuf data room (%d): raise data_room or lower the MTU",
			s.maxLen, HdrLen, room)
	}
	if err := s.setupZeroCopy(cfg); err != nil {
		return nil, err
	}
	s.setupCoalesce(cfg)
	for _, p := range e.ports {
		s.pend = append(s.pend, dpdk.NewMbufArray(4 * cfg.Burst)[:0])
		udp := cfg.UDPPort + uint16(index)
		s.ours = append(s.ours, Ours{MAC: p.mac, IP: p.ip, Port: udp})
		s.hdr = append(s.hdr, Header{SrcMAC: p.mac, SrcIP: p.ip, DstPort: udp, ECT: true,
			SoftIPChecksum: !p.txIPOffload, SoftUDPChecksum: p.udpSoft, OffloadUDP: p.txUDPOffload})
	}
	s.dest = make([]txDest, len(e.ports))
	return s, nil
}

// now is the shard's monotonic clock, in the core's Time.
func (s *Shard) now() verbs.Time { return verbs.Time(time.Since(s.epoch)) }

// Do runs fn on the shard's goroutine, between bursts, and waits for it:
// with RunApp, the only safe way for another goroutine to post work requests, poll
// completion queues or read counters of the shard's transport. now is the
// shard's clock. It returns an error when the shard has stopped.
func (s *Shard) Do(fn func(now verbs.Time)) error {
	c := cmd{fn: fn, done: make(chan struct{})}
	s.cmdMu.Lock()
	if s.stop.Load() {
		s.cmdMu.Unlock()
		return ErrStopped
	}
	s.cmds = append(s.cmds, c)
	s.cmdFlag.Store(true)
	s.kick.Set()
	s.cmdMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
		return nil
	case <-s.done:
		// The shard may have run it just before stopping.
		select {
		case <-c.done:
			return nil
		default:
			return ErrStopped
		}
	}
}

// Kick tells the shard, from any goroutine, that its application has
// work that came from outside the data path (a request another thread
// queued for the step to pick up): an idle shard waiting for frames in
// its driver call stops waiting and runs the step at once, instead of
// within idle_poll (Config.IdlePoll). It never blocks; a napping shard
// sees it at the end of its nap (at most max_idle_sleep).
func (s *Shard) Kick() {
	s.kick.Set()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ErrStopped means the shard no longer runs.
var ErrStopped = errors.New("dpdk engine: shard stopped")

// Counters returns a copy of the shard's counters.
func (s *Shard) Counters() (Counters, error) {
	var c Counters
	err := s.Do(func(verbs.Time) { c = s.c })
	return c, err
}

// StoppedCounters is the shard's final counters once its loop has ended
// (published after its queues were drained); false while it runs.
func (s *Shard) StoppedCounters() (Counters, bool) {
	select {
	case <-s.done:
	default:
		return Counters{}, false
	}
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.pub, true
}

// Done is closed when the shard's loop has ended; Err then says why.
func (s *Shard) Done() <-chan struct{} { return s.done }

// Err is the error that ended the loop (nil after a requested stop).
func (s *Shard) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *Shard) runCmds(now verbs.Time) {
	s.cmdMu.Lock()
	cmds := s.cmds
	s.cmds = nil
	s.cmdFlag.Store(false)
	s.cmdMu.Unlock()
	for _, c := range cmds {
		s.c.Commands++ // before fn: a Counters command counts itself
		c.fn(now)
		close(c.done)
	}
}

// nap sleeps this OS thread for d in the kernel (nanosleep), keeping its
// P: the shard's thread is locked and the nap is shorter than the
// runtime's hand-off of a P blocked in a system call.
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the loop polls again, no harm
}

// yieldEvery is how often a spinning idle shard yields its P.
const yieldEvery = verbs.Time(200 * time.Microsecond)

// run is the shard loop. It owns the OS thread it runs on.
func (s *Shard) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dpdk.RegisterThread(); err != nil {
		started <- err
		close(s.done)
		return
	}
	defer dpdk.UnregisterThread()
	started <- nil
	defer close(s.done)
	defer s.drain()
	defer s.flushAll() // what the last iteration built
	defer s.publish()

	var idleSince, lastYield verbs.Time
	idle := false
	sleep := time.Microsecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	s.sw.at = s.now()
	if s.index == 0 {
		s.resolveNeighbours(s.sw.at)
	}
	defer s.settleIdle() // before publish (deferred earlier, runs later)
	for !s.stop.Load() {
		if s.held && s.app == nil {
			if !s.park() {
				break
			}
			idle, sleep = false, time.Microsecond
		}
		s.c.Loops++
		// The clock is read once per phase boundary (timesplit.go): the
		// start (often the previous iteration's end), after the receive
		// bursts, after the core's share of each, after the application,
		// after the core produced, and at the end.
		now := s.startIteration()
		var spin verbs.Time
		if idle && !s.kick.IsSet() {
			// Nothing happened last iteration: the driver call may wait
			// for a frame, until the next timer or the end of the
			// spinning phase at the latest.
			spin = min(verbs.Time(s.e.cfg.IdlePoll), verbs.Time(s.e.cfg.IdleSpin)-(now-idleSince), s.tr.NextDeadline()-now)
		}
		work, now := s.poll(now, spin)
		polled := now
		if s.cmdFlag.Load() || s.app != nil {
			s.kick.Clear() // before the step: a later Kick is seen next time
			if s.cmdFlag.Load() {
				s.runCmds(now)
				work++
			}
			if s.app != nil {
				// The application's step, between this iteration's
				// receive burst and its transmit: what it posts goes
				// out now.
				if fin, err := s.app.Step(now); fin || err != nil {
					s.lap(PhaseApp)
					s.endIteration(true)
					s.endApp(err)
					s.sw.fresh = false
					continue
				}
			}
			now = s.lap(PhaseApp)
		}
		timers := s.tr.NextDeadline() <= now
		if timers {
			var w int
			w, now = s.catchUp(polled, now)
			work += w
			timers = s.tr.NextDeadline() <= now
		}
		s.checked = now
		if timers {
			s.tr.OnTimer(now)
		}
		work += s.transmit(now, timers)
		now = s.lap(PhaseTx)
		s.endIteration(work > 0)
		if now-s.lastPub >= publishEvery {
			s.lastPub = now
			s.publish()
			s.sw.fresh = false // the next start bills publishing to idle
		}
		if work > 0 {
			idle, sleep = false, time.Microsecond
			continue
		}
		if !idle {
			idle, idleSince = true, now
		}
		if now-idleSince < verbs.Time(s.e.cfg.IdleSpin) {
			// While spinning idle, let the scheduler run other goroutines
			// now and then: a shard holds a P, and an application that
			// posts work and polls completions through Do needs one; with
			// as many spinning shards as Ps it would wait for the 10ms
			// preemption tick, and the shards run dry. Not while an
			// application runs on this loop (RunApp): nothing else feeds
			// the shard then, and a locked thread's yield is a thread
			// handoff that a loaded machine can make last hundreds of
			// microseconds, each a packet's delay. The next yield is
			// counted from the end of this one, so that slow yields
			// cannot follow each other back to back.
			if s.app == nil && now-lastYield > yieldEvery {
				runtime.Gosched()
				lastYield = s.now()
				s.sw.fresh = false // the yield is idle time
			}
			continue
		}
		// Idle back-off: sleep, doubling up to MaxIdleSleep, but never past
		// the transport's next deadline; Do wakes us at once.
		d := sleep
		if dl := s.tr.NextDeadline(); dl != verbs.Never {
			d = min(d, time.Duration(dl-s.now()))
		}
		sleep = min(2*sleep, s.e.cfg.MaxIdleSleep)
		if d <= 0 {
			continue
		}
		s.sw.fresh = false // the sleep is idle time
		s.c.IdleSleeps++
		if s.app != nil {
			// With an application on the loop, nap in the kernel: this
			// thread's own timer is exact, where the Go runtime rounds a
			// sleep under a millisecond up to one when it has nothing
			// else to run, and a ping-pong whose ends had both gone idle
			// would then pay that in every round trip. Do and Stop wait
			// for the nap (at most MaxIdleSleep).
			nap(d)
			continue
		}
		timer.Reset(d)
		select {
		case <-timer.C:
		case <-s.wake:
			timer.Stop()
		}
	}
	s.cmdMu.Lock()
	cmds := s.cmds
	s.cmds = nil
	s.cmdMu.Unlock()
	for _, c := range cmds { // run what was queued before the stop
		c.fn(s.now())
		close(c.done)
	}
}

// drain frees every mbuf the shard still holds.
func (s *Shard) drain() {
	for i := range s.pend {
		dpdk.FreeBulk(s.pend[i])
		s.pend[i] = s.pend[i][:0]
	}
	dpdk.FreeBulk(s.spare)
	s.spare = s.spare[:0]
	dpdk.FreeBulk(s.rxDone)
	s.rxDone = s.rxDone[:0]
	if s.imp != nil {
		for _, h := range s.imp.held {
			dpdk.FreeBulk([]*dpdk.Mbuf{h.m})
		}
		for _, h := range s.imp.prev {
			dpdk.FreeBulk([]*dpdk.Mbuf{h.m})
		}
		s.imp.held, s.imp.prev = s.imp.held[:0], s.imp.prev[:0]
	}
	for _, a := range append(s.pend, s.rxb, s.frees, s.spare, s.rxDone) {
		dpdk.FreeMbufArray(a)
	}
	s.pend, s.rxb, s.frees, s.spare, s.rxDone = nil, nil, nil, nil, nil
	s.closeZeroCopy()
	s.publish()
	// s.kick stays: Do and Kick may still set it from other goroutines.
}

// poll makes the iteration's driver call on every port (dpdk.PortID.IO:
// the frames the previous iteration built go out, the ones it consumed are
// freed, a burst comes in) and hands each packet received to the
// transport; it returns the frames sent and received and the time after
// it. With
// spin > 0 and a single port the call may wait that long for a frame.
// Each burst goes in two halves with a clock read after each: parse every
// frame (rx), then hand the payloads to the core (core). The driver call's
// transmit part is billed to tx and its wait to idle, from the TSC cycles
// it measured.
func (s *Shard) poll(now verbs.Time, spin verbs.Time) (int, verbs.Time) {
	total := 0
	s.rxFull = false
	var cycles uint64
	if spin > 0 && len(s.ports) == 1 && s.io.canWait() {
		cycles = uint64(float64(spin) / s.tscNs)
	}
	lapped := true // nothing since the last clock read
	for i := range s.ports {
		frees := s.rxDone[:0]
		if i == 0 {
			frees = s.rxDone
		}
		r, calls := s.io.io(i, s.pend[i], frees, s.rxb, cycles, s.kick)
		s.c.DriverCalls += uint64(calls)
		s.c.RxPolls += uint64(r.Polls)
		if r.Spin > 0 {
			s.c.IdleWaits++
		}
		if i == 0 {
			s.rxDone = s.rxDone[:0]
		}
		s.sent(i, r.Sent)
		total += r.Sent // sending what the last iteration built is work too
		// Move the transmit burst's and the wait's time out of this lap.
		tx := verbs.Time(float64(r.TxTSC) * s.tscNs)
		wait := verbs.Time(float64(r.Spin) * s.tscNs)
		s.sw.cur[PhaseRx] -= tx + wait
		s.sw.cur[PhaseTx] += tx
		s.c.Time[PhaseIdle] += time.Duration(wait)
		lapped = false
		n := r.Got
		if n == 0 {
			continue
		}
		total += n
		s.rxFull = s.rxFull || n == len(s.rxb)
		s.c.RxFrames += uint64(n)
		for k, m := range s.rxb[:n] {
			s.c.RxBytes += uint64(m.Len())
			if !s.handle(now, i, m) {
				s.rxDone = append(s.rxDone, m)
			}
			if s.ackFlush > 0 && s.rxqN >= s.ackFlush && k+1 < n {
				now = s.flushMidBurst(now)
			}
		}
		if len(s.rxq) > 0 {
			now = s.receiveTimed()
			lapped = true
		}
	}
	if s.imp != nil {
		// Deliver what was held back in the previous round: it now
		// arrives behind everything received since.
		im := s.imp
		s.frees = s.frees[:0]
		for _, h := range im.prev {
			s.deliver(now, h.plane, h.m, false)
			s.frees = append(s.frees, h.m)
			if len(s.frees) == cap(s.frees) {
				s.receiveQueued(now)
				s.freeBulk(s.frees)
				s.frees = s.frees[:0]
			}
		}
		s.receiveQueued(now)
		s.freeBulk(s.frees)
		im.prev, im.held = im.held, im.prev[:0]
		lapped = false
	}
	if lapped {
		return total, now
	}
	return total, s.lap(PhaseRx)
}

// flushMidBurst hands the frames queued so far in this burst to the core
// and sends at once whatever the core then has ready, before the rest of
// the burst is handled (Config.AckFlush): an ACK due at once for a
// message's last packet leaves without waiting for the burst's last frame,
// so that a sender whose whole window came in one burst refills it while
// we handle the rest. It sends nothing while frames built earlier are
// still waiting for the driver (they go first, at the next driver call).
// One extra driver call when it sends; NextPacket once when nothing is
// ready.
func (s *Shard) flushMidBurst(now verbs.Time) verbs.Time {
	if len(s.rxq) == 0 {
		return now
	}
	now = s.receiveTimed()
	for i := range s.pend {
		if len(s.pend[i]) > 0 {
			return now
		}
	}
	if s.transmit(now, false) > 0 {
		s.c.AckFlushes++
		s.flushAll()
		now = s.lap(PhaseTx)
	}
	return now
}

// Catching up before timers fire (catchUp).
const (
	// catchUpAfter: a step or an iteration that took longer than this
	// (a long command, the thread descheduled) has let frames pile up in
	// the rings. MinRTO's default: a shorter stall expires no tail-loss
	// timer that a normal iteration would not. A full burst of 32 1 KiB
	// packets takes the core about 20µs here.
	catchUpAfter = 50 * time.Microsecond
	// catchUpBursts bounds the extra bursts per port: a peer sending
	// faster than we read cannot hold a due timer back for ever.
	catchUpBursts = 16
)

// catchUp reads what is waiting in the receive rings before due timers
// fire, and returns the frames moved and the time after. A timer judges
// a path by the ACKs that have arrived; after a stall those ACKs sit in
// the ring, behind a burst's worth of frames or unread since the
// iteration's poll, and the tail-loss timers fired for packets already
// acknowledged (TestTwoPlanes, run alone: 32 spurious timeouts in 10
// stalls of 10ms, 0 with catchUp; run after other tests some remain). It reads once when the step took longer than
// catchUpAfter since the poll, and on while bursts come back full when
// more than catchUpAfter passed since the last look at the timers (the
// loop fell behind); at most catchUpBursts bursts. A loop that keeps up
// with a flood is not held back by it: its ACK timers fire after one
// burst, as before.
func (s *Shard) catchUp(polled, now verbs.Time) (int, verbs.Time) {
	work := 0
	late := verbs.Time(catchUpAfter)
	behind := now-s.checked > late
	for k := 0; k < catchUpBursts && (now-polled > late || behind && s.rxFull); k++ {
		s.c.CatchUpPolls++
		var w int
		w, now = s.poll(now, 0)
		polled = now
		work += w
	}
	return work, now
}

// freeBulk frees mbufs outside the driver call (counted).
func (s *Shard) freeBulk(ms []*dpdk.Mbuf) {
	if len(ms) > 0 {
		dpdk.FreeBulk(ms)
		s.c.DriverCalls++
	}
}

// receiveTimed is receiveQueued with the clock read around it: the time
// since the last lap is billed to rx, the core's share to core. It
// returns the time after.
func (s *Shard) receiveTimed() verbs.Time {
	now := s.lap(PhaseRx)
	s.receiveQueued(now)
	return s.lap(PhaseCore)
}

// receiveQueued hands the queued payloads to the core, in arrival order.
func (s *Shard) receiveQueued(now verbs.Time) {
	for k := range s.rxq {
		q := &s.rxq[k]
		s.tr.Receive(now, q.payload, q.meta)
		q.payload = nil
	}
	s.rxq = s.rxq[:0]
	s.rxqN = 0
}

// handle processes one received frame. It returns true when it kept the
// mbuf (turned into a reply, or held back), false when the caller frees it.
func (s *Shard) handle(now verbs.Time, i int, m *dpdk.Mbuf) bool {
	frame := m.Data()
	et, d := EtherType(frame)
	if d != DropNone {
		s.c.Drops[d]++
		return false
	}
	if et == etherTypeARP {
		return s.onARP(now, i, m, frame)
	}
	if et != etherTypeIPv4 {
		s.c.Drops[DropNonIP]++
		return false
	}
	if s.imp != nil {
		// Impair only what is addressed to us; the rest is dropped below
		// for its own reason.
		var f UDPFrame
		if ParseUDP(frame, &s.ours[i], s.checks(i, m), &f) == DropNone {
			switch s.imp.verdict() {
			case 1:
				s.c.Drops[DropImpaired]++
				return false
			case 2:
				s.c.Reordered++
				s.imp.held = append(s.imp.held, heldPkt{m: m, plane: i})
				return true
			}
		}
	}
	s.deliver(now, i, m, true)
	return false
}

func (s *Shard) checks(i int, m *dpdk.Mbuf) Checks {
	p := s.ports[i]
	if !p.rxIPOffload && !p.rxUDPOffload {
		return Checks{}
	}
	f := m.OLFlags()
	return Checks{
		IPGood:  p.rxIPOffload && f&dpdk.RxIPCksumMask == dpdk.RxIPCksumGood,
		IPBad:   p.rxIPOffload && f&dpdk.RxIPCksumMask == dpdk.RxIPCksumBad,
		UDPGood: p.rxUDPOffload && f&dpdk.RxL4CksumMask == dpdk.RxL4CksumGood,
		UDPBad:  p.rxUDPOffload && f&dpdk.RxL4CksumMask == dpdk.RxL4CksumBad,
	}
}

// deliver parses an IPv4 frame and queues its payload for the transport
// (receiveQueued), which copies the data once, straight from the mbuf to
// its final address; the caller frees m only after that.
func (s *Shard) deliver(now verbs.Time, i int, m *dpdk.Mbuf, count bool) {
	var f UDPFrame
	if d := ParseUDP(m.Data(), &s.ours[i], s.checks(i, m), &f); d != DropNone {
		s.c.Drops[d]++
		return
	}
	peer, ok := s.neigh.lookup(f.SrcIP, learnData)
	if !ok {
		s.c.Drops[DropUnknownPeer]++
		return
	}
	// Learn a MAC from data only when we have none: the frame is not yet
	// verified (the core checks its CRC), so a forged one must not be
	// able to move a known neighbour. ARP may.
	if !s.neigh.known(peer, i) && s.neigh.learn(peer, i, f.SrcMAC) {
		s.c.ARPLearned++
	}
	s.c.RxDelivered++
	if f.CE {
		s.c.RxCE++
	}
	if f.NoChecksum {
		s.c.RxNoUDPChecksum++
	}
	s.rxq = append(s.rxq, rxItem{payload: f.Payload, meta: verbs.RxMeta{Peer: peer, Plane: verbs.PlaneID(i), CE: f.CE}})
	if s.weigh != nil {
		s.rxqN += s.weigh(f.Payload)
	} else {
		s.rxqN++
	}
}

// onARP answers requests for our address (rewriting the request mbuf into
// the reply, so it costs no allocation) and learns the sender's MAC when
// it is a neighbour of ours.
func (s *Shard) onARP(now verbs.Time, i int, m *dpdk.Mbuf, frame []byte) bool {
	a, d := ParseARP(frame)
	if d != DropNone {
		s.c.Drops[d]++
		return false
	}
	p := s.ports[i]
	if peer, ok := s.neigh.lookup(a.SenderIP, noLearn); ok && s.neigh.learn(peer, i, a.SenderMAC) {
		s.c.ARPLearned++
	}
	if a.Op != arpRequest || a.TargetIP != p.ip || len(s.pend[i]) == cap(s.pend[i]) {
		return false
	}
	n := WriteARP(m.Room(), arpReply, p.mac, p.ip, a.SenderMAC, a.SenderIP)
	m.SetLen(n)
	m.SetTxOffload(0, 0, 0, 0)
	s.pend[i] = append(s.pend[i], m)
	s.c.ARPRepliesSent++
	return true
}

// transmit sends what is pending, then takes packets from the transport
// into mbufs until it has nothing more or a burst is full, and sends them.
// While a port's queue refuses frames, nothing new is produced
// (back-pressure instead of drops). The core's half (NextPacket, and the
// timers that ran just before when timers is set) and the headers and
// bursts are split by one clock read.
func (s *Shard) transmit(now verbs.Time, timers bool) int {
	for i := range s.pend {
		// The iteration's driver call (poll) has just tried to send
		// what was pending.
		if len(s.pend[i]) > cap(s.pend[i])-2*s.burst {
			s.c.TxBlocked++
			return 0 // the queue is full: produce nothing until it drains
		}
	}
	s.built, s.metas = s.built[:0], s.metas[:0]
	for len(s.built) < s.burst {
		if len(s.spare) == 0 {
			s.spare = s.spare[:s.burst]
			s.c.DriverCalls++
			if err := s.e.pool.AllocBulk(s.spare); err != nil {
				s.spare = s.spare[:0]
				s.c.TxNoMbuf++
				break
			}
		}
		m := s.spare[len(s.spare)-1]
		var meta verbs.TxMeta
		var ok bool
		dgram := m.Room()[HdrLen : HdrLen+s.maxLen]
		if s.ext != nil {
			k := len(s.built)
			meta, ok = s.scat.NextPacketScatter(now, dgram, s.zcMin, &s.scats[k])
		} else {
			meta, ok = s.tr.NextPacket(now, dgram)
		}
		if !ok {
			break
		}
		if s.coal != nil && (s.ext == nil || s.scats[len(s.built)].Payload == nil) {
			meta = s.coalesceInto(now, dgram, meta)
		}
		s.spare = s.spare[:len(s.spare)-1]
		s.built = append(s.built, m)
		s.metas = append(s.metas, meta)
	}
	made := len(s.built)
	if made > 0 || timers {
		now = s.lap(PhaseCore)
	}
	s.frees = s.frees[:0]
	for k, m := range s.built {
		meta := s.metas[k]
		i := int(meta.Plane) % len(s.ports)
		d := &s.dest[i]
		if !d.ok || d.peer != meta.Peer || s.neigh.t.mac[i][d.hop].Load() != d.mac {
			if !s.newDest(now, i, m, meta.Peer) {
				continue
			}
		}
		m.SetLen(d.tpl.Write(m.Room(), uint16(meta.Entropy), meta.ECT, meta.Len))
		if p := s.ports[i]; p.txFlags != 0 {
			m.SetTxOffload(p.txFlags, EthHdrLen, IPv4HdrLen, 0)
		}
		if s.ext != nil && s.scats[k].Payload != nil {
			s.zeroCopy(m, &s.scats[k])
		}
		s.pend[i] = append(s.pend[i], m)
	}
	if s.ext != nil {
		s.zeroCopyFlush()
	}
	s.freeBulk(s.frees)
	s.built = s.built[:0]
	// What was built goes out at the start of the next iteration, in its
	// driver call (poll), which comes at once: an iteration that made
	// packets did work, so the loop neither waits nor sleeps before it.
	return made
}

// newDest makes peer port i's data destination (s.dest[i]) for frame m.
// When the peer, or the gateway that leads to it, is not resolved yet it
// returns false: the frame is dropped (the core resends it later), its
// mbuf goes back to the spares (or to s.frees), and an ARP request may go
// out.
func (s *Shard) newDest(now verbs.Time, i int, m *dpdk.Mbuf, peer verbs.PeerHandle) bool {
	d := &s.dest[i]
	d.ok = false
	hop := peer
	ip, _, _, ok := s.neigh.addr(peer, i)
	var v uint64 // the next hop's entry: read once, so the template and d.mac agree
	if ok {
		hop = s.ports[i].nextHop(peer, ip)
		v = s.neigh.t.mac[i][hop].Load()
		if hop != peer && v&macKnown == 0 {
			ip, _, _, _ = s.neigh.addr(hop, i) // resolve the gateway, not the peer
		}
	}
	if v&macKnown == 0 {
		s.c.NoNeighbour++
		// The packet is dropped (the core resends it later); its mbuf
		// goes back to the spares, where askARP may take it.
		if len(s.spare) < cap(s.spare) {
			s.spare = append(s.spare, m)
		} else {
			s.frees = append(s.frees, m)
		}
		if ok {
			s.askARP(now, i, hop, ip)
		}
		return false
	}
	h := &s.hdr[i]
	h.DstMAC, h.DstIP = bitsMAC(v), ip
	d.tpl.Build(h)
	d.ok, d.peer, d.hop, d.mac = true, peer, hop, v
	return true
}

// askARP sends a who-has for ip (the address of neighbour h: a peer or a
// gateway) on port i, unless one went out less than arpRetry ago. It
// takes an mbuf from the spares (the caller must not hold the last one).
func (s *Shard) askARP(now verbs.Time, i int, h verbs.PeerHandle, ip IPv4) {
	pr := i*maxPeers + int(h)
	if s.neigh.asked[pr] && now-s.neigh.lastARP[pr] < arpRetry {
		return
	}
	if len(s.pend[i]) == cap(s.pend[i]) {
		return
	}
	if len(s.spare) == 0 {
		s.spare = s.spare[:s.burst]
		s.c.DriverCalls++
		if err := s.e.pool.AllocBulk(s.spare); err != nil {
			s.spare = s.spare[:0]
			s.c.TxNoMbuf++
			return
		}
	}
	m := s.spare[len(s.spare)-1]
	s.spare = s.spare[:len(s.spare)-1]
	s.neigh.asked[pr], s.neigh.lastARP[pr] = true, now
	p := s.ports[i]
	m.SetLen(WriteARP(m.Room(), arpRequest, p.mac, p.ip, MAC{}, ip))
	m.SetTxOffload(0, 0, 0, 0)
	s.pend[i] = append(s.pend[i], m)
	s.c.ARPRequestsSent++
}

// resolveNeighbours asks, on every port, for the MAC of every static
// neighbour (or of the gateway that leads to it) not resolved yet, so
// that the first packets to them are not dropped while ARP answers.
func (s *Shard) resolveNeighbours(now verbs.Time) {
	for _, n := range s.e.cfg.Neighbours {
		for i, p := range s.ports {
			h := verbs.PeerHandle(n.Peer)
			ip, _, known, ok := s.neigh.addr(h, i)
			if !ok {
				continue
			}
			if hop := p.nextHop(h, ip); hop != h {
				h = hop
				ip, _, known, _ = s.neigh.addr(h, i)
			}
			if !known {
				s.askARP(now, i, h, ip)
			}
		}
	}
	for i := range s.pend {
		s.flush(i)
	}
}

func (s *Shard) flush(i int) {
	if len(s.pend[i]) == 0 {
		return
	}
	s.c.DriverCalls++
	s.sent(i, s.io.tx(i, s.pend[i]))
}

// flushAll sends what every port has pending (before parking or
// stopping: the driver call that would have sent it does not come).
func (s *Shard) flushAll() {
	for i := range s.pend {
		s.flush(i)
	}
}

// sent accounts for the first n frames of port i's pending ones, taken by
// the driver, and keeps the rest.
func (s *Shard) sent(i, n int) {
	p := s.pend[i]
	if n == 0 {
		return
	}
	// Count bytes before dropping them: sent mbufs belong to the driver.
	var bytes uint64
	for _, m := range p[:n] {
		bytes += uint64(m.Len())
	}
	s.c.TxBytes += bytes
	s.c.TxFrames += uint64(n)
	s.pend[i] = p[:copy(p, p[n:])]
}
