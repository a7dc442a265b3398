package main

/*
#include <stdint.h>
#include <infiniband/verbs.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"

static inline int mrg_call_push(mrg_push_fn f, struct mrv_cq *cq, const struct mrg_wc *wc, int n)
{
	return f(cq, wc, n);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/udp"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// maxQPWR is the deepest send or receive queue (libverbs/src/mrv.h).
const maxQPWR = 4096

// maxQPs is how many QPs one process has: the QPN's low byte is index+1.
const maxQPs = 255

// idleWait bounds the engine loop's sleep when nothing happens: posts and
// commands end it at once (eng.wake), packets and the transport's own
// deadlines too, so it bounds only the per-QP connect wait's lateness.
const idleWait = time.Millisecond

// eng is the process's one transport: a backend (UDP, or DPDK when the
// profile says so) and a device, run by one goroutine (backend.Run). C
// threads queue commands and work requests under mu, and step runs them;
// step runs on the engine goroutine, or on a program's thread that posts
// or polls while the loop sleeps (kick, MetaroceVerbsProgress: the
// backend's ownership makes it one thread at a time, so the core stays
// single-threaded).
type eng struct {
	mu   sync.Mutex
	be   engine.Backend
	dev  verbs.Device
	open openQP // the transport's one-to-one QPs (rocev2); nil: sessions and streams
	push C.mrg_push_fn
	ep   endpoint
	self netip.AddrPort

	cmds, running []func(now verbs.Time)
	nextHandle    uint32
	pds           map[uint32]*verbs.ProtectionDomain
	mrs           map[uint32]*verbs.MemoryRegion
	cqs           map[uint32]*cq
	qps           map[uint32]*qp
	byCore        map[verbs.QPN]*qp
	qpIdx         [maxQPs]bool
	peers         map[netip.AddrPort]verbs.PeerHandle
	sessions      map[verbs.PeerHandle]verbs.Session
	waiting       map[verbs.PeerHandle][]*qp
	// waitCheck: the earliest waitUntil of a QP in waiting (0: none), so
	// that a step looks at the waiting QPs only when one's time is up.
	waitCheck verbs.Time
	// posted lists the QPs with work in pendSend or pendRecv (mu), and
	// readyCQs the CQs with completions to collect or push (the engine
	// goroutine's): a step visits those, not every QP and CQ, so its cost
	// does not grow with the QPs and CQs a program holds. The spares are
	// the lists' other halves, swapped in each step.
	posted, spareQPs  []*qp
	readyCQs, spareCQ []*cq
	// asyncAt: when the step next looks for failed sessions (raiseAsync).
	asyncAt verbs.Time
	// waker ends the loop's idle wait when a C thread hands it work (nil
	// for a backend that cannot: then the work waits out the idle wait).
	waker waker
	// progresser runs the transport on a posting or polling thread while
	// the loop sleeps (nil for a backend that cannot); app is g.step.
	progresser progresser
	// driven tells whether a polling thread drives the transport (nil
	// for a backend that cannot): then a post leaves its work to that
	// thread's next empty poll (kickSend).
	driven driven
	app    engine.App
	// sender sends the transport's ready packets from inside a step (nil
	// for a backend that cannot).
	sender sender
}

// sender is a backend that sends from inside an App step
// (udp.Backend.SendNow).
type sender interface{ SendNow() error }

// waker is a backend whose wait for packets another thread can end
// (udp.Backend.Wake).
type waker interface{ Wake() }

// kicker is a backend that waits while idle inside its driver call (dpdk,
// up to idle_poll) and is told so of work queued for the step
// (dpdkengine.Backend.Kick); kickWaker makes it a waker.
type kicker interface{ Kick() }

type kickWaker struct{ k kicker }

func (w kickWaker) Wake() { w.k.Kick() }

// progresser is a backend that runs the transport on the caller's thread
// while its loop sleeps (udp.Backend.Progress).
type progresser interface {
	Progress(app engine.App, drive time.Duration) (ran, moved bool, err error)
}

// driven is a backend that says whether another thread drives it now
// and lets that thread's posts keep its drive going (udp.Backend.Driven,
// ExtendDrive).
type driven interface {
	Driven() bool
	ExtendDrive(d time.Duration)
}

// postDrive is how long a post left to the posting thread's next poll
// keeps that thread's drive going, or starts one when it has passed
// (cqwait.c's MRV_DRIVE_NS, a drive's bound): the thread is still in the
// program's post-then-poll loop, and should it leave, the loop takes the
// work when the drive passes (udp.Backend.ExtendDrive).
const postDrive = 100 * time.Microsecond

// wake makes the engine goroutine run the work just queued now.
func (g *eng) wake() {
	if g.waker != nil {
		g.waker.Wake()
	}
}

// kick gets posted work moving: on the posting thread if the loop is
// asleep (its packets leave without a thread wake-up), else by waking it.
func (g *eng) kick() {
	if g.progresser != nil {
		if ran, _, _ := g.progresser.Progress(g.app, 0); ran {
			return // an error is the loop's to report, at its next step
		}
	}
	g.wake()
}

// kickSend gets posted send work moving, or leaves it to a thread that
// polls: the posting thread itself (lazy: it polled within its spin,
// cqwait.c) or the one that drives the transport (udp.Backend.Driven),
// which takes it at its next poll that finds its CQ empty, with whatever
// else was posted by then, in one step whose send pass batches the
// packets, as the native path's loop does. Each post running a step and a
// send system call of its own cost ib_write_bw a fifth of its rate at 4
// KiB (docs/verbs.md). It reports whether it left the work (the C side
// then kicks before the program may stop polling).
func (g *eng) kickSend(lazy bool) bool {
	if g.progresser != nil {
		if lazy {
			if g.driven != nil {
				g.driven.ExtendDrive(postDrive)
			}
			return true
		}
		if g.driven != nil && g.driven.Driven() {
			return true
		}
	}
	g.kick()
	return false
}

// MetaroceVerbsKick gets the send work left by kickSend moving now: the
// C side calls it before the program may stop polling (it arms a CQ or
// waits for a channel event), so that the work does not wait for the
// drive to pass.
//
//export MetaroceVerbsKick
func MetaroceVerbsKick() C.int {
	g := startedEng.Load()
	if g == nil {
		return 0
	}
	g.kick()
	return 0
}

// MetaroceVerbsProgress runs the transport on the calling thread, a
// program's poll that found its CQ empty (cqwait.c), if the loop is
// asleep, and lets that thread watch the socket for the next driveNS
// (its drive; a loop found busy steps aside for it at its next
// iteration, udp.Backend.Progress); it returns MRG_PROGRESS_MOVED if it
// ran and that sent or received a packet (the transport is in use: the
// poller spins on), MRG_PROGRESS_RAN if it ran and nothing moved,
// MRG_PROGRESS_BUSY if the loop was running the transport,
// MRG_PROGRESS_NONE otherwise.
//
//export MetaroceVerbsProgress
func MetaroceVerbsProgress(driveNS C.int64_t) C.int {
	g := startedEng.Load()
	if g == nil || g.progresser == nil || driveNS <= 0 {
		return C.MRG_PROGRESS_NONE
	}
	if ran, moved, _ := g.progresser.Progress(g.app, time.Duration(driveNS)); moved {
		return C.MRG_PROGRESS_MOVED
	} else if ran {
		return C.MRG_PROGRESS_RAN
	}
	return C.MRG_PROGRESS_BUSY
}

// startedEng is the running transport, nil before it started: a poll
// never starts it (theEng is guarded by engOnce, which a poll must not
// wait on).
var startedEng atomic.Pointer[eng]

// cq is a completion queue: the core's, and the C ring it drains into.
type cq struct {
	core    *verbs.CompletionQueue
	c       *C.struct_mrv_cq
	buf     []verbs.WorkCompletion
	out     []C.struct_mrg_wc // translated, not yet taken by the C ring
	users   int
	pushed  bool // completions went into the ring this step (their event is due)
	listed  bool // in eng.readyCQs
	gone    bool // destroyed: a listed entry is skipped
	handle  uint32
	scratch *C.struct_mrg_wc // C memory: cap entries
	cap     int
}

// sendSlot remembers what the core's WR ID seq stands for.
type sendSlot struct {
	wrid     uint64
	signaled bool
}

// qp is a verbs QP: its index and QPN, the core QP once connected, and the
// work posted before that.
type qp struct {
	handle      uint32
	idx         int
	qpn         uint32
	pd          *verbs.ProtectionDomain
	scq, rcq    *cq
	core        verbs.QP
	peer        netip.AddrPort
	stream      int
	pendSend    []C.struct_mrg_send_wr // posted, not yet taken by the engine (mu)
	pendRecv    []C.struct_mrg_recv_wr
	slots       []sendSlot // by seq % len
	seq         uint64
	outstanding atomic.Int64 // sends posted and not completed: posts add (mu), the engine subtracts
	sqDepth     int
	destroyed   bool
	removed     bool // ibv_destroy_qp ran: an entry in eng.posted is skipped
	listed      bool // in eng.posted (mu)
	failed      error
	// waitUntil: while the QP waits for its peer's connection (accepting
	// side), when its work fails instead (failUnconnected); 0 otherwise.
	waitUntil verbs.Time
	// timers: the budgets ibv_modify_qp set (min_rnr_timer at RTR, the
	// rest at RTS), which the core QP is held to.
	timers   verbs.QPTimers
	session  verbs.Session // the core QP's, once attached
	sendSeen bool          // a send completion was reported
	ev       qpAsync       // what its asynchronous events depend on (async.go)
	// setSendPSN takes sq_psn at the first RTS (a QP of openQP); nil
	// otherwise and after.
	setSendPSN func(uint32) error

	// The work the engine took from pendSend and pendRecv and is handing
	// to the core (the engine goroutine's alone).
	takenSend []C.struct_mrg_send_wr
	takenRecv []C.struct_mrg_recv_wr
}

// timerSetter is a core QP whose budgets can change after creation
// (ibv_modify_qp to RTS after the RTR that created it).
type timerSetter interface {
	SetTimers(now verbs.Time, t verbs.QPTimers)
}

var (
	engOnce sync.Once
	theEng  *eng
	engErr  error
)

// start opens the backend and the device and runs the loop (once). Both
// happen on the engine thread (onEngineThread), which stays in the
// backend's Run.
func start(e endpoint, push C.mrg_push_fn) (*eng, error) {
	engOnce.Do(func() {
		ready := make(chan struct{})
		onEngineThread(func() {
			g, err := open(e, push)
			theEng, engErr = g, err
			if err == nil {
				startedEng.Store(g)
			}
			close(ready)
			if err != nil {
				return
			}
			if err := g.be.Run(context.Background(), g.app); err != nil {
				fmt.Fprintf(os.Stderr, "metaroce verbs: the transport stopped: %v\n", err)
			}
			deviceFatal()
		})
		<-ready
	})
	return theEng, engErr
}

var (
	threadOnce sync.Once
	threadWork chan func()
)

// onEngineThread runs f on the engine thread: one goroutine of the
// library's own, which runs what is queued in order, the last of it the
// backend's Run, which never returns. The DPDK EAL makes the thread that
// starts it its main lcore (and locks the goroutine to it for good), so
// that must not be a C thread of the program's that merely called in;
// prestartBackend (at ibv_open_device) and start (at the first PD or CQ)
// both run here. f signals its own completion.
func onEngineThread(f func()) {
	threadOnce.Do(func() {
		threadWork = make(chan func(), 2)
		go func() {
			for f := range threadWork {
				f()
			}
		}()
	})
	threadWork <- f
}

// open opens the backend and the device and attaches one to the other.
func open(e endpoint, push C.mrg_push_fn) (*eng, error) {
	be, err := newBackend(e)
	if err != nil {
		return nil, fmt.Errorf("metaroce verbs: %v", err)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%v/%d/%d", be.LocalAddr(), os.Getpid(), time.Now().UnixNano())
	tr, err := newTransport(e.cfg, be, mr.NodeID(h.Sum64()|1))
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("metaroce verbs: %v", err)
	}
	if err := be.Attach(tr.dev); err != nil {
		be.Close()
		return nil, fmt.Errorf("metaroce verbs: %v", err)
	}
	g := &eng{be: be, dev: tr.dev, open: tr.open, push: push, ep: e, self: be.LocalAddr(), nextHandle: 1,
		pds: map[uint32]*verbs.ProtectionDomain{}, mrs: map[uint32]*verbs.MemoryRegion{},
		cqs: map[uint32]*cq{}, qps: map[uint32]*qp{}, byCore: map[verbs.QPN]*qp{},
		peers: map[netip.AddrPort]verbs.PeerHandle{}, sessions: map[verbs.PeerHandle]verbs.Session{},
		waiting: map[verbs.PeerHandle][]*qp{}}
	g.waker, _ = be.(waker)
	if k, ok := be.(kicker); ok && g.waker == nil {
		g.waker = kickWaker{k}
	}
	g.progresser, _ = be.(progresser)
	g.driven, _ = be.(driven)
	g.sender, _ = be.(sender)
	g.app = engine.AppFunc(g.step)
	return g, nil
}

// newUDPBackend is the default backend: a UDP socket on the device's
// address and port, with the profile's udp keys as the metaroce command
// applies them (cmd/metaroce openBackend), but for udp.port and the
// addresses: the device's are verbs.ip and verbs.port.
func newUDPBackend(e endpoint) (engine.Backend, error) {
	u := e.cfg.UDP
	return udp.New(udp.Config{Addr: netip.AddrPortFrom(e.ip, uint16(e.port)), IdleWait: idleWait, Wakeable: true,
		Burst: u.Burst, DSCP: uint8(u.DSCP), Loss: u.Loss, Seed: uint64(u.Seed), SocketBuffer: u.SocketBuffer})
}

// do runs f on the engine goroutine and returns its result.
func (g *eng) do(f func(now verbs.Time) error) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.cmds = append(g.cmds, func(now verbs.Time) { done <- f(now) })
	g.mu.Unlock()
	g.wake()
	return <-done
}

func (g *eng) handle() uint32 {
	h := g.nextHandle
	g.nextHandle++
	if g.nextHandle == 0 {
		g.nextHandle = 1
	}
	return h
}

// step is the application part of the loop: commands, accepted sessions,
// posted work, completions. It holds mu only to run the commands and to
// take the posted work (posting threads wait for nothing else): the core
// and the C rings are the engine goroutine's alone.
func (g *eng) step(now verbs.Time) (bool, error) {
	g.mu.Lock()
	if len(g.cmds) > 0 && g.sender != nil {
		// What the last receive made ready (its ACK) leaves before a
		// command destroys the QP or closes the device: the program
		// may have seen that completion on a thread that ran the
		// transport, before the send pass that would have sent it.
		_ = g.sender.SendNow() // a send error is the loop's to report
	}
	g.running, g.cmds = g.cmds, g.running[:0]
	for _, f := range g.running {
		f(now)
	}
	for {
		s, ok := g.dev.Accept()
		if !ok {
			break
		}
		h := s.Peer()
		if _, dup := g.sessions[h]; dup {
			continue // one session per peer; a second CONNECT is the peer's retry
		}
		g.sessions[h] = s
		for _, q := range g.waiting[h] {
			g.attach(now, q, s)
		}
		delete(g.waiting, h)
	}
	if g.waitCheck != 0 && now >= g.waitCheck {
		g.expireWaiting(now)
	}
	posted := g.posted
	g.posted, g.spareQPs = g.spareQPs[:0], nil
	for _, q := range posted {
		q.listed = false
		switch {
		case q.removed:
		case q.core != nil:
			// Swapped, not copied: the engine posts takenX below,
			// and the threads append to the emptied pendX meanwhile.
			q.takenRecv, q.pendRecv = q.pendRecv, q.takenRecv[:0]
			q.takenSend, q.pendSend = q.pendSend, q.takenSend[:0]
		case q.failed != nil:
			g.failUnconnected(q) // what was posted since it failed is flushed
		}
		// Otherwise not connected yet: the work waits in pendX for
		// attach (flush), or for failUnconnected.
	}
	g.mu.Unlock()
	for _, q := range posted {
		if len(q.takenRecv) > 0 || len(q.takenSend) > 0 {
			g.post(now, q, q.takenRecv, q.takenSend)
			q.takenRecv, q.takenSend = q.takenRecv[:0], q.takenSend[:0]
		}
	}
	clear(posted)
	g.spareQPs = posted[:0]
	// Every CQ's completions are collected (and the send queues' slots
	// freed) before any is pushed: a program that sees its receive
	// completion may post at once, from another thread, and must find
	// the slot of the send the same batch completed free. Only the CQs
	// that had a completion pushed or left over are visited (readyCQs).
	ready := g.readyCQs
	g.readyCQs, g.spareCQ = g.spareCQ[:0], nil
	for _, c := range ready {
		c.listed = false
		if !c.gone {
			g.collect(c)
		}
	}
	for _, c := range ready {
		if !c.gone {
			g.pushOut(c)
		}
	}
	// The channel events last, once every ring holds its completions:
	// a program woken by one event polls the CQ it expects, which may be
	// another (perftest's -e loops wait for any event, then poll the send
	// CQ once), and must find its completion there.
	for _, c := range ready {
		if c.gone {
			continue
		}
		if c.pushed {
			c.pushed = false
			C.mrg_call_push(g.push, c.c, nil, 0)
		}
		if len(c.out) > 0 {
			g.markCQ(c) // the ring was full: the rest goes at the next step
		}
	}
	clear(ready)
	g.spareCQ = ready[:0]
	if now >= g.asyncAt {
		// Sessions fail seldom and their event may come a little late:
		// looked for once a millisecond, not at every step.
		g.asyncAt = now.Add(time.Millisecond)
		g.raiseAsync()
	}
	return false, nil
}

// markPosted lists q for the next step's posting pass (mu held): every
// change to q.pendSend or q.pendRecv calls it.
func (g *eng) markPosted(q *qp) {
	if !q.listed {
		q.listed = true
		g.posted = append(g.posted, q)
	}
}

// markCQ lists c for the next step's collection and push (the engine
// goroutine: the core's push, through the CQ's OnReady, or a completion
// the library made, fail).
func (g *eng) markCQ(c *cq) {
	if !c.listed {
		c.listed = true
		g.readyCQs = append(g.readyCQs, c)
	}
}

// expireWaiting fails the waiting QPs whose time is up and sets waitCheck
// to the next (mu held).
func (g *eng) expireWaiting(now verbs.Time) {
	var expired []*qp
	g.waitCheck = 0
	for _, w := range g.waiting {
		for _, q := range w {
			switch {
			case now >= q.waitUntil:
				expired = append(expired, q)
			case g.waitCheck == 0 || q.waitUntil < g.waitCheck:
				g.waitCheck = q.waitUntil
			}
		}
	}
	for _, q := range expired {
		g.failUnconnected(q)
	}
}

// attach creates q's core QP on session s and posts what waited.
func (g *eng) attach(now verbs.Time, q *qp, s verbs.Session) {
	timers := q.timers
	core, err := s.CreateQP(q.stream, verbs.QPAttr{PD: q.pd, SendCQ: q.scq.core, RecvCQ: q.rcq.core, Timers: &timers})
	if err != nil {
		q.failed = err
		fmt.Fprintf(os.Stderr, "metaroce verbs: QP %#x: stream %d on %v: %v\n", q.qpn, q.stream, q.peer, err)
		g.markPosted(q) // its work fails at the next step (failUnconnected)
		return
	}
	q.core, q.waitUntil, q.session = core, 0, s
	g.byCore[core.QPN()] = q
	g.flush(now, q)
}

var opcodes = [...]verbs.WROpcode{C.MRG_OP_WRITE: verbs.WRWrite, C.MRG_OP_WRITE_IMM: verbs.WRWriteImm,
	C.MRG_OP_SEND: verbs.WRSend, C.MRG_OP_SEND_IMM: verbs.WRSendImm, C.MRG_OP_READ: verbs.WRRead}

// flush posts q's waiting work to its core QP (mu held).
func (g *eng) flush(now verbs.Time, q *qp) {
	g.post(now, q, q.pendRecv, q.pendSend)
	q.pendRecv, q.pendSend = q.pendRecv[:0], q.pendSend[:0]
}

// post hands receives and sends to q's core QP, receives first (a SEND
// posted after them may be answered by one of them).
func (g *eng) post(now verbs.Time, q *qp, recvs []C.struct_mrg_recv_wr, sends []C.struct_mrg_send_wr) {
	for i := range recvs {
		r := &recvs[i]
		err := q.core.PostRecv(now, verbs.RecvWR{ID: uint64(r.wr_id),
			Local: verbs.SGE{Addr: uint64(r.addr), Length: uint32(r.length), LKey: verbs.LKey(r.lkey)}})
		if err != nil {
			g.fail(q.rcq, uint64(r.wr_id), C.IBV_WC_LOC_PROT_ERR, C.IBV_WC_RECV, q.qpn)
		}
	}
	for i := range sends {
		s := &sends[i]
		slot := q.seq % uint64(len(q.slots))
		q.slots[slot] = sendSlot{wrid: uint64(s.wr_id), signaled: s.signaled != 0}
		op := opcodes[s.opcode]
		err := q.core.PostSend(now, verbs.SendWR{ID: q.seq, Opcode: op,
			Local:      verbs.SGE{Addr: uint64(s.addr), Length: uint32(s.length), LKey: verbs.LKey(s.lkey)},
			RemoteAddr: uint64(s.remote_addr), RKey: verbs.RKey(s.rkey), Imm: uint32(s.imm)})
		q.seq++
		if err != nil {
			q.outstanding.Add(-1)
			g.fail(q.scq, uint64(s.wr_id), C.IBV_WC_LOC_PROT_ERR, sendWCOp(op), q.qpn)
		}
	}
}

// fail queues an error completion the core never saw (a post it refused).
func (g *eng) fail(c *cq, wrid uint64, status, op, qpn uint32) {
	c.out = append(c.out, C.struct_mrg_wc{wr_id: C.uint64_t(wrid), status: C.uint32_t(status),
		opcode: C.uint32_t(op), qp_num: C.uint32_t(qpn)})
	g.markCQ(c)
}

// wcStatus is the ibv_wc_status of a core status (a switch, not a map:
// it runs once per completion).
func wcStatus(s verbs.Status) uint32 {
	switch s {
	case verbs.StatusSuccess:
		return C.IBV_WC_SUCCESS
	case verbs.StatusLocalLengthError:
		return C.IBV_WC_LOC_LEN_ERR
	case verbs.StatusLocalProtError:
		return C.IBV_WC_LOC_PROT_ERR
	case verbs.StatusRemoteAccessError:
		return C.IBV_WC_REM_ACCESS_ERR
	case verbs.StatusRemoteOpError:
		return C.IBV_WC_REM_OP_ERR
	case verbs.StatusRetryExceeded:
		return C.IBV_WC_RETRY_EXC_ERR
	case verbs.StatusRNRRetryExceeded:
		return C.IBV_WC_RNR_RETRY_EXC_ERR
	case verbs.StatusFlushed:
		return C.IBV_WC_WR_FLUSH_ERR
	case verbs.StatusRemoteInvalidReq:
		return C.IBV_WC_REM_INV_REQ_ERR
	case verbs.StatusLocalAccessError:
		return C.IBV_WC_LOC_ACCESS_ERR
	}
	return C.IBV_WC_GENERAL_ERR
}

var wcOpcodes = [...]uint32{verbs.WCSend: C.IBV_WC_SEND, verbs.WCWrite: C.IBV_WC_RDMA_WRITE,
	verbs.WCRead: C.IBV_WC_RDMA_READ, verbs.WCRecv: C.IBV_WC_RECV, verbs.WCRecvWriteImm: C.IBV_WC_RECV_RDMA_WITH_IMM}

// collect translates c's core completions into c.out: send completions
// get back the program's wr_id, unsignaled successes are dropped (as an
// HCA does), errors are always reported.
func (g *eng) collect(c *cq) {
	for {
		n := c.core.Poll(c.buf)
		for _, wc := range c.buf[:n] {
			q := g.byCore[wc.QPN]
			if q == nil {
				continue // a destroyed QP's flush
			}
			st := wcStatus(wc.Status)
			wrid := wc.WRID
			if wc.Opcode == verbs.WCSend || wc.Opcode == verbs.WCWrite || wc.Opcode == verbs.WCRead {
				if wc.Status == verbs.StatusLocalLengthError {
					// The responder's receive was too short: the
					// core reports the responder's status on both
					// sides, a RoCE HCA's requester sees the
					// responder's Invalid Request NAK.
					st = C.IBV_WC_REM_INV_REQ_ERR
				}
				if wc.Status == verbs.StatusFlushed && !q.sendSeen && q.session != nil &&
					q.session.FailReason() == verbs.FailConnectTimeout {
					// The dialing side of a QP whose peer never
					// connected: the core flushes the session that
					// never came up; an HCA's requester reports its
					// first work request as retried to exhaustion.
					st = C.IBV_WC_RETRY_EXC_ERR
				}
				q.sendSeen = true
				s := q.slots[wc.WRID%uint64(len(q.slots))]
				q.outstanding.Add(-1)
				if !s.signaled && wc.Status == verbs.StatusSuccess {
					continue
				}
				wrid = s.wrid
			}
			w := C.struct_mrg_wc{wr_id: C.uint64_t(wrid), status: C.uint32_t(st),
				opcode: C.uint32_t(wcOpcodes[wc.Opcode]), byte_len: C.uint32_t(wc.ByteLen), qp_num: C.uint32_t(q.qpn)}
			if wc.HasImm {
				w.imm, w.with_imm = C.uint32_t(wc.Imm), 1
			}
			g.noteWC(q, &w)
			c.out = append(c.out, w)
		}
		if n < len(c.buf) {
			break
		}
	}
}

// pushOut moves c.out into c's C ring, as much as fits.
func (g *eng) pushOut(c *cq) {
	for len(c.out) > 0 {
		k := min(len(c.out), c.cap)
		dst := unsafe.Slice(c.scratch, c.cap)
		copy(dst, c.out[:k])
		took := int(C.mrg_call_push(g.push, c.c, c.scratch, C.int(k)))
		c.out = c.out[:copy(c.out, c.out[took:])]
		c.pushed = c.pushed || took > 0
		if took < k {
			break // the ring is full: the rest waits for the program to poll
		}
	}
}

// connect binds q (at RTR) to the peer QP dest at ip: the QPN names the
// peer's UDP port and QP index, the lower address dials, the higher one
// accepts, and both name the stream lo<<8 | hi from the two indices.
func (g *eng) connect(now verbs.Time, q *qp, ip netip.Addr, dest, rqPSN uint32) error {
	ridx := int(dest&0xff) - 1
	if ridx < 0 || dest>>8 == 0 || dest > 0xffffff {
		return fmt.Errorf("metaroce verbs: dest_qp_num %#x is not a QPN of this library (port << 8 | index+1)", dest)
	}
	peer := netip.AddrPortFrom(ip, uint16(dest>>8))
	if peer == g.self {
		return errors.New("metaroce verbs: a QP connected to its own process is not supported")
	}
	h, ok := g.peers[peer]
	if !ok {
		var err error
		if h, err = g.be.AddPeer(peer); err != nil {
			return fmt.Errorf("metaroce verbs: %v", err)
		}
		g.peers[peer] = h
	}
	q.peer = peer
	if g.open != nil {
		return g.openDirect(now, q, h, dest, rqPSN)
	}
	lower := g.self.Addr().Less(peer.Addr()) || g.self.Addr() == peer.Addr() && g.self.Port() < peer.Port()
	if lower {
		q.stream = q.idx<<8 | ridx
	} else {
		q.stream = ridx<<8 | q.idx
	}
	if s, ok := g.sessions[h]; ok {
		g.attach(now, q, s)
		return nil
	}
	if lower {
		s, err := g.dev.Dial(now, h, 1)
		if err != nil {
			return fmt.Errorf("metaroce verbs: connecting to %v: %v", peer, err)
		}
		g.sessions[h] = s
		g.attach(now, q, s)
		return nil
	}
	g.waiting[h] = append(g.waiting[h], q)
	q.waitUntil = now.Add(acceptWait(g.ep.cfg))
	if g.waitCheck == 0 || q.waitUntil < g.waitCheck {
		g.waitCheck = q.waitUntil
	}
	return nil
}

// openDirect opens q's core QP at RTR, one to one with the peer's QP dest
// (rocev2): it is connected at once, and what was posted goes out.
func (g *eng) openDirect(now verbs.Time, q *qp, h verbs.PeerHandle, dest, rqPSN uint32) error {
	timers := q.timers
	core, setPSN, err := g.open(now, h, q.qpn, dest, rqPSN,
		verbs.QPAttr{PD: q.pd, SendCQ: q.scq.core, RecvCQ: q.rcq.core, Timers: &timers})
	if err != nil {
		return fmt.Errorf("metaroce verbs: QP %#x to %v QP %#x: %v", q.qpn, q.peer, dest, err)
	}
	q.core, q.setSendPSN = core, setPSN
	g.byCore[core.QPN()] = q
	g.flush(now, q)
	return nil
}

// failUnconnected ends the work of a QP that will never have a core QP:
// its peer never connected (it died before its RTR, or gave up), or the
// core refused the QP. As an HCA whose requester got no answer, the
// first send completes with IBV_WC_RETRY_EXC_ERR, the rest and every
// receive are flushed, and so is whatever is posted afterwards.
func (g *eng) failUnconnected(q *qp) {
	g.unconnected(q, q.failed == nil && len(q.pendSend) > 0)
	if q.failed == nil {
		q.failed = fmt.Errorf("metaroce verbs: QP %#x: %v never connected", q.qpn, q.peer)
		fmt.Fprintln(os.Stderr, q.failed)
		g.dropWaiting(q)
		if len(q.pendSend) > 0 {
			s := q.pendSend[0]
			q.pendSend = q.pendSend[1:]
			q.outstanding.Add(-1)
			g.fail(q.scq, uint64(s.wr_id), C.IBV_WC_RETRY_EXC_ERR, sendWCOp(opcodes[s.opcode]), q.qpn)
		}
	}
	for _, s := range q.pendSend {
		q.outstanding.Add(-1)
		g.fail(q.scq, uint64(s.wr_id), C.IBV_WC_WR_FLUSH_ERR, sendWCOp(opcodes[s.opcode]), q.qpn)
	}
	q.pendSend = q.pendSend[:0]
	for _, r := range q.pendRecv {
		g.fail(q.rcq, uint64(r.wr_id), C.IBV_WC_WR_FLUSH_ERR, C.IBV_WC_RECV, q.qpn)
	}
	q.pendRecv = q.pendRecv[:0]
}

// dropWaiting removes q from the QPs waiting for a connection.
func (g *eng) dropWaiting(q *qp) {
	q.waitUntil = 0
	for p, w := range g.waiting {
		for i, x := range w {
			if x == q {
				g.waiting[p] = append(w[:i], w[i+1:]...)
				return
			}
		}
	}
}

// sendWCOp is the completion opcode of a send-queue work request.
func sendWCOp(op verbs.WROpcode) uint32 {
	switch op {
	case verbs.WRWrite, verbs.WRWriteImm:
		return C.IBV_WC_RDMA_WRITE
	case verbs.WRRead:
		return C.IBV_WC_RDMA_READ
	}
	return C.IBV_WC_SEND
}
