package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/udp"
	"github.com/metaroce/metaroce/internal/transports"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/verbs"
)

// openBackend opens the profile's backend on local address ip, on the
// transport's UDP port. Wiring a second backend is one more case here.
func openBackend(cfg profile.Config, t profile.Transport, ip netip.Addr, port int) (engine.Backend, error) {
	switch cfg.Backend {
	case profile.BackendUDP:
		u := cfg.UDP
		b, err := udp.New(udp.Config{Addr: netip.AddrPortFrom(ip, uint16(port)), Burst: u.Burst,
			SocketBuffer: u.SocketBuffer, DSCP: uint8(u.DSCP), Loss: u.Loss, Seed: uint64(u.Seed), Coalesce: u.Coalesce})
		if err != nil {
			return nil, err
		}
		return b, nil
	case profile.BackendDPDK:
		// The DPDK engine is started once per process (dpdkHost), not per
		// node: perf and bench take their data path from it.
		return nil, errors.New("backend dpdk: open it with startDPDK")
	}
	return nil, fmt.Errorf("backend %q", cfg.Backend)
}

// transportPort is the UDP port a transport listens on, from the profile.
func transportPort(cfg profile.Config, t profile.Transport) int {
	if k, ok := transportKinds[t]; ok {
		return k.Port(cfg)
	}
	return cfg.UDP.Port
}

// errInterrupted: SIGINT (or the peer going away) stopped the run.
var errInterrupted = errors.New("interrupted")

// region is a registered buffer of either transport.
type region struct {
	buf  []byte
	addr uint64
	rkey uint32
	sge  func(off, n int) verbs.SGE
}

// regionInfo is what the peer needs to name a region in WRITE and READ.
type regionInfo struct {
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Len  int    `json:"len"`
}

func (r *region) info() regionInfo { return regionInfo{Addr: r.addr, RKey: r.rkey, Len: len(r.buf)} }

// node is one endpoint: a transport device driven by a backend, with one
// registered buffer and the queue pairs of one session (metaroce: one
// Conn with a QP per stream; RoCEv2: a Conn per QP, and the server accepts
// one session per QP). A node belongs to the goroutine that created it.
type node struct {
	name string // the transport's name, for messages
	kind transportKind
	be   engine.Backend
	dev  verbs.Device
	sess []verbs.Session // the client's one, or the sessions the server accepted
	qps  []verbs.QP
	cq   *verbs.CompletionQueue
	mem  *region
	pd   *verbs.ProtectionDomain
	peer verbs.PeerHandle
	// peerAddr is the peer's data-path address, for the banner.
	peerAddr string
	slot     int // bytes of each QP's slot in mem (the largest message, times perfParams.slots)
	stride   int // bytes between a slot's message sub-slots (--verify)
	// peerRepair is the peer's loss repair, from its "done" message.
	peerRepair *repairStats
	wcs        []verbs.WorkCompletion
	// sampler, when set, copies the counters for the metrics endpoint;
	// run calls it every 100 ms, on the backend's loop.
	sampler    func()
	lastSample time.Time
	// serving: the server has all its sessions; later ones are refused.
	serving bool
	// closedStats is what the backend had counted when close ran: a
	// closed backend reports zeros, and the metrics endpoint may still be
	// scraped after it (bench closes each cell's nodes before the next).
	closedStats atomic.Pointer[engine.Stats]
	// freeBuf frees the registered buffer when the backend allocated it
	// (engine.RegionAllocator); nil for Go heap memory.
	freeBuf func() error
}

// newNode builds the transport on be and registers a buffer of bufLen
// bytes. paths overrides metaroce.paths when not 0.
func newNode(cfg profile.Config, t profile.Transport, be engine.Backend, server bool, id mr.NodeID, bufLen, paths, depth int) (*node, error) {
	kind, err := kindOf(t)
	if err != nil {
		return nil, err
	}
	n := &node{name: string(t), kind: kind, be: be, cq: verbs.NewCompletionQueue(4096), wcs: make([]verbs.WorkCompletion, 64)}
	if n.dev, err = kind.NewDevice(cfg, be, transports.Options{Server: server, ID: id, Paths: paths, Depth: depth}); err != nil {
		return nil, err
	}
	buf := make([]byte, bufLen)
	if a, ok := be.(engine.RegionAllocator); ok {
		// Memory the backend's driver may read in place (DPDK's: what
		// zero-copy TX lends); the Go heap when it has none to give.
		if b, free, err := a.AllocRegion(bufLen); err == nil && b != nil {
			buf, n.freeBuf = b, free
		}
	}
	n.pd = n.dev.AllocPD()
	reg, err := n.pd.RegisterMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err == nil {
		n.mem = &region{buf: buf, addr: reg.Addr(), rkey: uint32(reg.RKey()), sge: reg.SGE}
		err = be.Attach(n.dev)
	}
	if err != nil {
		if n.freeBuf != nil {
			_ = n.freeBuf() // nothing was sent from it
		}
		return nil, err
	}
	return n, nil
}

// connect sets up nqp queue pairs with the peer: the client dials, the
// server accepts, both run the backend until every QP is usable or the
// deadline passes.
func (n *node) connect(server bool, nqp int, deadline time.Time, stop func() bool) error {
	if !server {
		s, err := n.dev.Dial(n.be.Now(), n.peer, nqp)
		if err != nil {
			return err
		}
		n.sess = append(n.sess, s)
	}
	err := n.run(func(verbs.Time) (bool, error) {
		if n.ready(server, nqp) {
			n.serving = server
			return true, nil
		}
		if why := n.setupFailed(); why != verbs.FailNone {
			// Its retries are spent: waiting out the deadline would only
			// hide the reason for the rest of the setup timeout.
			return false, fmt.Errorf("%s connection failed: %v", n.name, why)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%s connection not established within the setup timeout", n.name)
		}
		if stop != nil && stop() {
			return false, errInterrupted
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	// Queue pair i of the client pairs with queue pair i of the server: the
	// sessions' queue pairs in order (metaroce: stream i of the one
	// connection; RoCEv2: the i-th connection, in the order it was dialed
	// and accepted).
	for _, s := range n.sess {
		for i := 0; i < s.MaxQPs() && len(n.qps) < nqp; i++ {
			q, err := s.CreateQP(i, verbs.QPAttr{PD: n.pd, SendCQ: n.cq, RecvCQ: n.cq})
			if err != nil {
				return err
			}
			n.qps = append(n.qps, q)
		}
	}
	return nil
}

// capacity is the number of queue pairs the node's sessions can carry.
func (n *node) capacity() int {
	k := 0
	for _, s := range n.sess {
		k += s.MaxQPs()
	}
	return k
}

// ready reports whether every session is up (accepting what arrived).
func (n *node) ready(server bool, nqp int) bool {
	if server {
		for n.capacity() < nqp {
			s, ok := n.dev.Accept()
			if !ok {
				break
			}
			if s.Peer() != n.peer {
				// Not the client the setup channel named: refused.
				s.Close(n.be.Now())
				continue
			}
			n.sess = append(n.sess, s)
		}
	}
	if n.capacity() < nqp {
		return false
	}
	for _, s := range n.sess {
		if !s.Established() {
			return false
		}
	}
	return true
}

// setupFailed is why one of the node's sessions failed (FailNone while
// none has: a failed session is neither established nor connecting).
func (n *node) setupFailed() verbs.FailReason {
	for _, s := range n.sess {
		if why := s.FailReason(); why != verbs.FailNone {
			return why
		}
	}
	return verbs.FailNone
}

// run runs the backend's loop (engine.Backend.Run) with step as the
// application's part: once per iteration, on the loop's goroutine, after
// the metrics sampler, until step reports done or an error.
func (n *node) run(step func(now verbs.Time) (bool, error)) error {
	return n.be.Run(context.Background(), engine.AppFunc(func(now verbs.Time) (bool, error) {
		if n.serving {
			// The server has its sessions: whatever else connects is
			// closed at once, not left in the device's accept queue.
			for s, ok := n.dev.Accept(); ok; s, ok = n.dev.Accept() {
				s.Close(now)
			}
		}
		if n.sampler != nil {
			if t := time.Now(); t.Sub(n.lastSample) >= 100*time.Millisecond {
				n.lastSample = t
				n.sampler()
			}
		}
		return step(now)
	}))
}

// poll returns the completions waiting (valid until the next poll).
func (n *node) poll() []verbs.WorkCompletion {
	k := n.cq.Poll(n.wcs)
	return n.wcs[:k]
}

// recvLen is the length of each posted receive.
func (n *node) recvLen() int { return n.slot }

// close releases the backend's sockets, keeping its last counters for
// backendStats.
func (n *node) close() {
	st := n.be.Stats()
	n.closedStats.Store(&st)
	n.be.Close()
	if n.freeBuf != nil {
		// After Close: the backend's loop has stopped, and the region
		// waits for whatever its driver still holds.
		if err := n.freeBuf(); err != nil {
			fmt.Fprintln(os.Stderr, "metaroce:", err)
		}
		n.freeBuf = nil
	}
}

// backendStats is the backend's counters, or once closed the last ones it
// reported. Safe from any goroutine.
func (n *node) backendStats() engine.Stats {
	if st := n.closedStats.Load(); st != nil {
		return *st
	}
	return n.be.Stats()
}
