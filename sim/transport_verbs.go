package sim

import (
	"fmt"

	"github.com/metaroce/metaroce/verbs"
)

// This file is the one adapter between the simulator's World and any
// transport core, written against the verbs interfaces only: each host has
// one verbs.Device carrying all of its connections; a connection is a
// session with one queue pair (index 0) at each end. Each host registers
// two buffers of the largest message: a source buffer (what it WRITEs and
// SENDs, and where its READs land) and a region the peer WRITEs into and
// READs from, which also backs the receives it posts. By default messages
// are WRITE_IMMs into the peer's region, so the receiver learns of each
// arrival from a receive completion; workload.ops rotates WRITE,
// WRITE_IMM, SEND, SEND_IMM and READ (see sim.Op). The acceptor keeps
// 2·outstanding+8 receives posted per connection, one back for each one
// used.
//
// A transport's own file gives only its parameters and a deviceSpec: how
// to build host h's device, and how to read its counters.

// deviceSpec is what a transport adds to the generic adapter.
type deviceSpec struct {
	name string
	// newDevice builds host h's device.
	newDevice func(h int) (verbs.Device, error)
	// holdPosts: messages posted while the session is still connecting are
	// held by the adapter and posted, in order, once it is up (metaroce's
	// adapter always did so; keeping it keeps the figures).
	holdPosts bool
	// placed is the payload placed so far by one end's session.
	placed func(verbs.Session) uint64
	// counters sums the transport's counters over sessions (both ends of
	// every connection, in Dial order; nil for an end not yet accepted).
	counters func([]verbs.Session) []Field
}

// planeBinder is an optional extension of a device for transports whose
// queue pairs each keep to one plane (RoCEv2): the adapter tells it the
// plane of the traffic it sends to the peer's queue pair qpn.
type planeBinder interface {
	bindPlane(peer verbs.PeerHandle, qpn verbs.QPN, plane uint8)
}

// newVerbsWorld builds the hosts' devices and memory.
func newVerbsWorld(env WorldEnv, spec deviceSpec) (World, error) {
	w := &verbsWorld{spec: spec, recvDepth: 2*env.Outstanding + 8, planes: max(env.Planes, 1), perPair: map[[2]int]int{},
		recvLen: recvLen(env), recvIDs: hasOp(env.Ops, OpSend)}
	srcAccess, dstAccess := memAccess(env.Ops)
	for h := 0; h < env.Hosts; h++ {
		dev, err := spec.newDevice(h)
		if err != nil {
			return nil, err
		}
		pd := dev.AllocPD()
		src, err := pd.RegisterMR(make([]byte, env.MaxMessage), srcAccess)
		if err != nil {
			return nil, err
		}
		dst, err := pd.RegisterMR(make([]byte, env.MaxMessage), dstAccess)
		if err != nil {
			return nil, err
		}
		w.hosts = append(w.hosts, &verbsHost{dev: dev, pd: pd, src: src, dst: dst,
			scq: verbs.NewCompletionQueue(1024), rcq: verbs.NewCompletionQueue(1024),
			dialed: map[verbs.QPN]ConnRef{}, accepted: map[verbs.QPN]ConnRef{}, byOrigin: map[uint32]ConnRef{},
			wcs: make([]verbs.WorkCompletion, 64)})
	}
	return w, nil
}

type verbsWorld struct {
	spec      deviceSpec
	hosts     []*verbsHost
	conns     []verbsConn
	perPair   map[[2]int]int // connections dialed so far, by (src, dst)
	recvDepth int
	planes    int
	recvLen   int  // bytes of each posted receive (0 unless SENDs are posted)
	recvIDs   bool // SENDs are posted: track ids for their receive completions
}

type verbsHost struct {
	dev      verbs.Device
	pd       *verbs.ProtectionDomain
	src, dst *verbs.MemoryRegion
	scq, rcq *verbs.CompletionQueue
	dialed   map[verbs.QPN]ConnRef // by the dialer's queue pair
	accepted map[verbs.QPN]ConnRef // by the acceptor's queue pair
	byOrigin map[uint32]ConnRef    // dialed sessions, by Session.Origin
	wcs      []verbs.WorkCompletion
	waiting  []ConnRef // connections with posts held until they are established
}

type verbsConn struct {
	src, dst int
	plane    uint8 // the k-th connection between a pair of hosts: plane k mod planes
	s        verbs.Session
	qp       verbs.QP
	rs       verbs.Session // the acceptor's end, once accepted
	rqp      verbs.QP
	held     []heldPost
	ids      idQueue // ids of posted messages that use a receive (when recvIDs)
}

// heldPost is a message posted before its connection was established (see
// deviceSpec.holdPosts).
type heldPost struct {
	op Op
	n  int
	id uint32
}

func (w *verbsWorld) Host(i int) verbs.Transport { return w.hosts[i].dev }

func (w *verbsWorld) Dial(now verbs.Time, src, dst int) (ConnRef, error) {
	h := w.hosts[src]
	s, err := h.dev.Dial(now, verbs.PeerHandle(dst), 1)
	if err != nil {
		return -1, err
	}
	qp, err := s.CreateQP(0, verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return -1, err
	}
	ref := ConnRef(len(w.conns))
	k := w.perPair[[2]int{src, dst}]
	w.perPair[[2]int{src, dst}] = k + 1
	w.conns = append(w.conns, verbsConn{src: src, dst: dst, s: s, qp: qp, plane: uint8(k % w.planes)})
	h.dialed[qp.QPN()] = ref
	h.byOrigin[s.Origin()] = ref
	return ref, nil
}

// errNotUsable: a message posted on a connection that failed to connect.
var errNotUsable = fmt.Errorf("connection is closed or failed")

func (w *verbsWorld) Post(now verbs.Time, ref ConnRef, op Op, n int, id uint32) error {
	c := &w.conns[ref]
	if w.spec.holdPosts && (!c.s.Established() || len(c.held) > 0) {
		if !c.s.Connecting() && len(c.held) == 0 {
			return errNotUsable
		}
		if len(c.held) == 0 {
			h := w.hosts[c.src]
			h.waiting = append(h.waiting, ref)
		}
		c.held = append(c.held, heldPost{op, n, id})
		return nil
	}
	return w.post(now, c, op, n, id)
}

func (w *verbsWorld) post(now verbs.Time, c *verbsConn, op Op, n int, id uint32) error {
	h, peer := w.hosts[c.src], w.hosts[c.dst]
	wr, err := sendWR(op, id, h.src.SGE(0, n), peer.dst.Addr(), peer.dst.RKey())
	if err != nil {
		return fmt.Errorf("%s: %w", w.spec.name, err)
	}
	if err := c.qp.PostSend(now, wr); err != nil {
		return err
	}
	if w.recvIDs && op.consumesRecv() {
		c.ids.push(id)
	}
	return nil
}

// recvWR is a receive as the adapter posts it: with a buffer for SENDs
// when the workload posts any, empty otherwise (a WRITE_IMM needs none).
func (h *verbsHost) recvWR(n int) verbs.RecvWR {
	if n == 0 {
		return verbs.RecvWR{}
	}
	return verbs.RecvWR{Local: h.dst.SGE(0, n)}
}

func (w *verbsWorld) Poll(now verbs.Time, hi int, sink func(Completion)) {
	h := w.hosts[hi]
	if len(h.waiting) > 0 {
		w.release(now, h)
	}
	for {
		rs, ok := h.dev.Accept()
		if !ok {
			break
		}
		w.accept(now, hi, rs)
	}
	for h.scq.Len() > 0 {
		k := h.scq.Poll(h.wcs)
		for _, wc := range h.wcs[:k] {
			ref, ok := h.dialed[wc.QPN]
			if !ok {
				continue
			}
			op, id := splitWRID(wc.WRID)
			okWC := wc.Status == verbs.StatusSuccess
			if okWC && !op.consumesRecv() {
				// WRITE, READ: no receive completion at the peer.
				sink(Completion{Conn: ref, Recv: true, ID: id, Bytes: int(wc.ByteLen), OK: true})
			}
			sink(Completion{Conn: ref, ID: id, Bytes: int(wc.ByteLen), OK: okWC})
		}
	}
	for h.rcq.Len() > 0 {
		k := h.rcq.Poll(h.wcs)
		for _, wc := range h.wcs[:k] {
			ref, ok := h.accepted[wc.QPN]
			if !ok {
				continue
			}
			c := &w.conns[ref]
			id := wc.Imm
			if wc.Status != verbs.StatusFlushed {
				// Keep the receive queue full: one receive back per one used.
				_ = c.rqp.PostRecv(now, h.recvWR(w.recvLen))
				if w.recvIDs {
					id = c.ids.pop()
				}
			}
			sink(Completion{Conn: ref, Recv: true, ID: id, Bytes: int(wc.ByteLen), OK: wc.Status == verbs.StatusSuccess})
		}
	}
}

// release posts the held messages of connections that are now up.
func (w *verbsWorld) release(now verbs.Time, h *verbsHost) {
	keep := h.waiting[:0]
	for _, ref := range h.waiting {
		c := &w.conns[ref]
		if !c.s.Established() {
			if c.s.Connecting() {
				keep = append(keep, ref)
			}
			continue
		}
		for _, p := range c.held {
			_ = w.post(now, c, p.op, p.n, p.id)
		}
		c.held = nil
	}
	h.waiting = keep
}

// accept matches a session host hi accepted to the Dial that opened it (by
// its origin, the dialer's id for it), gives it its queue pair and
// receives before any data can arrive, and binds both ends to the
// connection's plane where the transport wants that.
func (w *verbsWorld) accept(now verbs.Time, hi int, rs verbs.Session) {
	peer := int(rs.Peer())
	if peer < 0 || peer >= len(w.hosts) {
		return
	}
	ref, ok := w.hosts[peer].byOrigin[rs.Origin()]
	if !ok {
		return
	}
	h := w.hosts[hi]
	c := &w.conns[ref]
	qp, err := rs.CreateQP(0, verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return
	}
	c.rs, c.rqp = rs, qp
	h.accepted[qp.QPN()] = ref
	if b, ok := h.dev.(planeBinder); ok && c.plane != 0 {
		// The acceptor's packets go to the dialer's QP; the dialer's to
		// ours. (The dialer's first packets, its connection request, go on
		// plane 0: connection management is not bound to a data port.)
		b.bindPlane(verbs.PeerHandle(c.src), c.qp.QPN(), c.plane)
		w.hosts[c.src].dev.(planeBinder).bindPlane(verbs.PeerHandle(hi), qp.QPN(), c.plane)
	}
	for i := 0; i < w.recvDepth; i++ {
		_ = qp.PostRecv(now, h.recvWR(w.recvLen))
	}
}

func (w *verbsWorld) Delivered(ref ConnRef) uint64 {
	c := &w.conns[ref]
	d := w.spec.placed(c.s) // READ responses
	if c.rs != nil {
		d += w.spec.placed(c.rs)
	}
	return d
}

func (w *verbsWorld) Counters() []Field {
	ss := make([]verbs.Session, 0, 2*len(w.conns))
	for i := range w.conns {
		ss = append(ss, w.conns[i].s, w.conns[i].rs)
	}
	return w.spec.counters(ss)
}
