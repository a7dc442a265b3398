package main

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/engine/udp"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// dataPath is what a node needs from a backend. engine/udp.Backend is
// one; the DPDK engine is to be the other (see openBackend).
type dataPath interface {
	Attach(t verbs.Transport) error
	Step(wait time.Duration) (bool, error)
	Now() verbs.Time
	AddPeer(addr netip.AddrPort) (verbs.PeerHandle, error)
	PeerIP(h verbs.PeerHandle) [4]byte
	LocalIP() [4]byte
	LocalAddr() netip.AddrPort
	SetCapture(c udp.Capture)
	Stats() *udp.Stats
	Close() error
}

// openBackend opens the profile's backend on local address ip, on the
// transport's UDP port. Wiring a second backend is one more case here.
func openBackend(cfg profile.Config, t profile.Transport, ip netip.Addr, port int) (dataPath, error) {
	switch cfg.Backend {
	case profile.BackendUDP:
		u := cfg.UDP
		b, err := udp.New(udp.Config{Addr: netip.AddrPortFrom(ip, uint16(port)), Burst: u.Burst,
			SocketBuffer: u.SocketBuffer, DSCP: uint8(u.DSCP), Loss: u.Loss, Seed: uint64(u.Seed)})
		if err != nil {
			return nil, err
		}
		return udpPath{b}, nil
	case profile.BackendDPDK:
		// The DPDK engine is started once per process (dpdkHost), not per
		// node: perf and bench take their data path from it.
		return nil, errors.New("backend dpdk: open it with startDPDK")
	}
	return nil, fmt.Errorf("backend %q", cfg.Backend)
}

// udpPath is the UDP backend as a dataPath.
type udpPath struct{ *udp.Backend }

func (u udpPath) Attach(t verbs.Transport) error { u.Backend.Attach(t); return nil }

// transportPort is the UDP port a transport listens on, from the profile.
func transportPort(cfg profile.Config, t profile.Transport) int {
	if t == profile.TransportRoCEv2 {
		return cfg.UDP.RoCEv2Port
	}
	return cfg.UDP.Port
}

// errInterrupted: SIGINT (or the peer going away) stopped the run.
var errInterrupted = errors.New("interrupted")

// qp is a queue pair of either transport.
type qp interface {
	PostSend(now verbs.Time, wr verbs.SendWR) error
	PostRecv(now verbs.Time, wr verbs.RecvWR) error
}

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

// node is one endpoint: a transport core driven by a backend, with one
// registered buffer and the queue pairs of one connection (metaroce: one
// Conn with a QP per stream; RoCEv2: a Conn per QP). A node belongs to the
// goroutine that created it.
type node struct {
	kind profile.Transport
	be   dataPath
	t    verbs.Transport
	mEP  *mr.Endpoint
	rEP  *rocev2.Endpoint
	mc   *mr.Conn
	rcs  []*rocev2.Conn
	qps  []qp
	cq   *verbs.CompletionQueue
	mem  *region
	mPD  *verbs.ProtectionDomain
	rPD  *verbs.ProtectionDomain
	peer verbs.PeerHandle
	// peerAddr is the peer's data-path address, for the banner.
	peerAddr string
	slot     int // bytes of each QP's slot in mem (the largest message)
	wcs      []verbs.WorkCompletion
	// sampler, when set, copies the counters for the metrics endpoint;
	// step calls it every 100 ms, on the node's goroutine.
	sampler    func()
	lastSample time.Time
}

// newNode builds the transport on be and registers a buffer of bufLen
// bytes. paths overrides metaroce.paths when not 0.
func newNode(cfg profile.Config, kind profile.Transport, be dataPath, server bool, id mr.NodeID, bufLen, paths, depth int) (*node, error) {
	n := &node{kind: kind, be: be, cq: verbs.NewCompletionQueue(4096), wcs: make([]verbs.WorkCompletion, 64)}
	buf := make([]byte, bufLen)
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	switch kind {
	case profile.TransportMetaroce:
		if paths == 0 {
			paths = cfg.Metaroce.Paths
		}
		m := cfg.Metaroce
		mc := m.Core()
		mc.Node, mc.Incarnation = id, mr.Incarnation(time.Now().UnixNano()&0x7fffffff|1)
		mc.Paths, mc.AcceptIncoming = paths, server
		mc.SendQueueDepth, mc.RecvQueueDepth = max(4096, depth), max(4096, depth)
		ep, err := mr.NewEndpoint(mc)
		if err != nil {
			return nil, err
		}
		n.mPD = ep.AllocPD()
		reg, err := n.mPD.RegisterMR(buf, access)
		if err != nil {
			return nil, err
		}
		n.mEP, n.t = ep, ep
		n.mem = &region{buf: buf, addr: reg.Addr(), rkey: uint32(reg.RKey()), sge: reg.SGE}
	case profile.TransportRoCEv2:
		r := cfg.RoCEv2
		c := rocev2.Config{LocalIP: be.LocalIP(), PeerIP: func(h verbs.PeerHandle) rocev2.IPv4 { return be.PeerIP(h) },
			MTU: r.MTU, AckTimeoutCode: uint8(r.AckTimeoutCode), RetryCount: r.RetryCount, AcceptIncoming: server,
			SendQueueDepth: max(4096, depth), RecvQueueDepth: max(4096, depth)}
		c.DCQCN.Disable = !r.DCQCN
		ep, err := rocev2.NewEndpoint(c)
		if err != nil {
			return nil, err
		}
		n.rPD = ep.AllocPD()
		reg, err := n.rPD.RegisterMR(buf, access)
		if err != nil {
			return nil, err
		}
		n.rEP, n.t = ep, ep
		n.mem = &region{buf: buf, addr: reg.Addr(), rkey: uint32(reg.RKey()), sge: reg.SGE}
	default:
		return nil, fmt.Errorf("transport %q", kind)
	}
	if err := be.Attach(n.t); err != nil {
		return nil, err
	}
	return n, nil
}

// connect sets up nqp queue pairs with the peer: the client dials, the
// server accepts, both step the backend until every QP is usable or the
// deadline passes.
func (n *node) connect(server bool, nqp int, deadline time.Time, stop func() bool) error {
	now := n.be.Now()
	if !server {
		switch n.kind {
		case profile.TransportMetaroce:
			c, err := n.mEP.Connect(now, n.peer)
			if err != nil {
				return err
			}
			n.mc = c
		case profile.TransportRoCEv2:
			for i := 0; i < nqp; i++ {
				c, err := n.rEP.Connect(now, n.peer)
				if err != nil {
					return err
				}
				n.rcs = append(n.rcs, c)
			}
		}
	}
	for {
		if n.ready(server, nqp) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s connection not established within the setup timeout", n.kind)
		}
		if stop != nil && stop() {
			return errInterrupted
		}
		if err := n.step(time.Millisecond); err != nil {
			return err
		}
	}
	switch n.kind {
	case profile.TransportMetaroce:
		for i := 0; i < nqp; i++ {
			q, err := n.mc.CreateQP(mr.StreamID(i), verbs.QPAttr{PD: n.mPD, SendCQ: n.cq, RecvCQ: n.cq})
			if err != nil {
				return err
			}
			n.qps = append(n.qps, q)
		}
	case profile.TransportRoCEv2:
		for _, c := range n.rcs {
			q, err := c.CreateQP(verbs.QPAttr{PD: n.rPD, SendCQ: n.cq, RecvCQ: n.cq})
			if err != nil {
				return err
			}
			n.qps = append(n.qps, q)
		}
	}
	return nil
}

// ready reports whether every connection is up (accepting what arrived).
func (n *node) ready(server bool, nqp int) bool {
	switch n.kind {
	case profile.TransportMetaroce:
		if server && n.mc == nil {
			n.mc, _ = n.mEP.Accept()
		}
		return n.mc != nil && n.mc.Established()
	default:
		if server {
			for len(n.rcs) < nqp {
				c, ok := n.rEP.Accept()
				if !ok {
					break
				}
				n.rcs = append(n.rcs, c)
			}
		}
		if len(n.rcs) < nqp {
			return false
		}
		for _, c := range n.rcs {
			if !c.Established() {
				return false
			}
		}
		return true
	}
}

// step runs the backend once (see udp.Backend.Step).
func (n *node) step(wait time.Duration) error {
	_, err := n.be.Step(wait)
	if n.sampler != nil {
		if now := time.Now(); now.Sub(n.lastSample) >= 100*time.Millisecond {
			n.lastSample = now
			n.sampler()
		}
	}
	return err
}

func metricsPathID(i int) verbs.PathID { return verbs.PathID(i) }

// poll returns the completions waiting (valid until the next poll).
func (n *node) poll() []verbs.WorkCompletion {
	k := n.cq.Poll(n.wcs)
	return n.wcs[:k]
}

// recvLen is the length of each posted receive.
func (n *node) recvLen() int { return n.slot }

// close releases the backend's sockets.
func (n *node) close() { n.be.Close() }
