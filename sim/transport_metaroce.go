package sim

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/metaroce/metaroce/internal/keys"
	mr "github.com/metaroce/metaroce/metaroce"
)

// This file is the metaroce adapter: the protocol core as the simulator
// runs it. One metaroce.Endpoint per host carries all of that host's
// connections; each connection has one queue pair (stream 0) at each end.
// Each host registers two buffers of the largest message: a source buffer
// (what it WRITEs and SENDs, and where its READs land) and a region the
// peer WRITEs into and READs from, which also backs the receives it posts.
// By default messages are WRITE_IMMs into the peer's region, so the
// receiver learns of each arrival from a receive completion; workload.ops
// rotates WRITE, WRITE_IMM, SEND, SEND_IMM and READ (see sim.Op). The
// acceptor keeps 2·outstanding+8 receives posted per connection, one back
// for each one used.

// MetaRoCEParams is the transport.metaroce section of an experiment file:
// the core's own Config, whose `key` tags name the keys (the same names as
// a profile's metaroce section; docs/config-keys.md lists them), and one
// key of the simulator's. Zero values take metaroce.Config's defaults,
// except where the fabric decides: mtu defaults to transport.mtu (on an
// Ethernet fabric with 9000-byte frames metaroce can carry 8 KiB payloads,
// where RoCEv2's IB MTU stops at 4096) and planes to topology.planes (at
// most that: a plane is a NIC port). The fields without a key tag
// (identity, link rate, queue depths) are the adapter's to set.
type MetaRoCEParams struct {
	mr.Config `key:",inline"`
	// NoRateHints leaves the receiver's link rate unknown to the endpoint,
	// so it gives no rate hints (the senders rely on ECN alone).
	NoRateHints bool `key:"no_rate_hints"`
}

// core is the endpoint configuration for these parameters on hosts with
// planes NIC ports of nicGbps each.
func (p *MetaRoCEParams) core(planes, mtu int, nicGbps float64) mr.Config {
	cfg := p.Config
	if cfg.MTU == 0 {
		cfg.MTU = mtu
	}
	if cfg.Planes == 0 {
		cfg.Planes = planes
	}
	if !p.NoRateHints {
		// The receiver knows its link: every NIC port together.
		cfg.LinkRateBps = float64(planes) * nicGbps * 1e9
	}
	return cfg
}

// CheckParams implements paramsChecker: the core judges the parameters
// when the file is loaded, and the error names the key (the core reports
// a field by its Go name, whose key its tag gives).
func (metaroceTransport) CheckParams(c *Config, params any) error {
	p := params.(*MetaRoCEParams)
	if p.Planes > c.Topology.Planes {
		return fmt.Errorf("transport.metaroce.planes = %d, want at most topology.planes = %d", p.Planes, c.Topology.Planes)
	}
	cfg := p.core(min(c.Topology.Planes, mr.MaxPlanes), c.Transport.MTU, c.Topology.NICGbps)
	err := cfg.Defaults().Validate()
	var ce *mr.ConfigError
	if errors.As(err, &ce) {
		if k, ok := keys.KeyOf(reflect.TypeOf(mr.Config{}), ce.Field); ok {
			return fmt.Errorf("transport.metaroce.%s %s", k, ce.Msg)
		}
		return fmt.Errorf("transport.metaroce: %s %s (from topology or transport.mtu)", ce.Field, ce.Msg)
	}
	return err
}

type metaroceTransport struct{}

func (metaroceTransport) Name() string    { return "metaroce" }
func (metaroceTransport) UDPPort() uint16 { return mr.DefaultUDPPort }
func (metaroceTransport) NewParams() any  { return &MetaRoCEParams{} }

func (metaroceTransport) PacketLens(mtu int) (int, int) {
	return mr.HeaderLen + mr.MsgHeaderLen + mtu + mr.CRCLen, mr.HeaderLen + mr.AckPrefixLen + mr.AckBlockCompactLen + mr.CRCLen
}

func (metaroceTransport) NewWorld(env WorldEnv, params any) (World, error) {
	p := params.(*MetaRoCEParams)
	w := &mrWorld{recvDepth: 2*env.Outstanding + 8, recvLen: recvLen(env), recvIDs: hasOp(env.Ops, OpSend)}
	srcAccess, dstAccess := memAccess(env.Ops)
	for h := 0; h < env.Hosts; h++ {
		cfg := p.core(env.Planes, env.MTU, env.NICGbps)
		cfg.Node, cfg.Incarnation, cfg.AcceptIncoming = mr.NodeID(h+1), 1, true
		if cfg.Planes > mr.MaxPlanes {
			return nil, fmt.Errorf("metaroce: %d planes, at most %d", cfg.Planes, mr.MaxPlanes)
		}
		ep, err := mr.NewEndpoint(cfg)
		if err != nil {
			return nil, err
		}
		pd := ep.AllocPD()
		src, err := pd.RegisterMR(make([]byte, env.MaxMessage), srcAccess)
		if err != nil {
			return nil, err
		}
		dst, err := pd.RegisterMR(make([]byte, env.MaxMessage), dstAccess)
		if err != nil {
			return nil, err
		}
		w.hosts = append(w.hosts, &mrHost{ep: ep, pd: pd, src: src, dst: dst,
			scq: mr.NewCompletionQueue(1024), rcq: mr.NewCompletionQueue(1024),
			dialed: map[mr.ConnID]ConnRef{}, accepted: map[mr.ConnID]ConnRef{},
			wcs: make([]mr.WorkCompletion, 64)})
	}
	return w, nil
}

type mrWorld struct {
	hosts     []*mrHost
	conns     []mrConn
	recvDepth int
	recvLen   int  // bytes of each posted receive (0 unless SENDs are posted)
	recvIDs   bool // SENDs are posted: track ids for their receive completions
}

type mrHost struct {
	ep       *mr.Endpoint
	pd       *mr.ProtectionDomain
	src, dst *mr.MemoryRegion
	scq, rcq *mr.CompletionQueue
	dialed   map[mr.ConnID]ConnRef // by the sender's local connection id
	accepted map[mr.ConnID]ConnRef // by the receiver's local connection id
	wcs      []mr.WorkCompletion
	waiting  []ConnRef // connections with posts held until they are established
}

type mrConn struct {
	src, dst int
	c        *mr.Conn
	qp       *mr.QueuePair
	rc       *mr.Conn // the receiver's end, once accepted
	rqp      *mr.QueuePair
	held     []heldPost
	ids      idQueue // ids of posted messages that use a receive (when recvIDs)
}

// heldPost is a message posted before its connection was established.
// metaroce.Connect documents that work requests may be posted at once, but
// PostSend on a connection that is still connecting divides by its MTU,
// which is zero until the ACCEPT arrives (qp.go, chunksFor): until the
// core is fixed, the adapter holds such posts and hands them over in
// order once the connection is up.
type heldPost struct {
	op Op
	n  int
	id uint32
}

func (w *mrWorld) Host(i int) mr.Transport { return w.hosts[i].ep }

func (w *mrWorld) Dial(now mr.Time, src, dst int) (ConnRef, error) {
	h := w.hosts[src]
	c, err := h.ep.Connect(now, mr.PeerHandle(dst))
	if err != nil {
		return -1, err
	}
	qp, err := c.CreateQP(0, mr.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return -1, err
	}
	ref := ConnRef(len(w.conns))
	w.conns = append(w.conns, mrConn{src: src, dst: dst, c: c, qp: qp})
	h.dialed[c.LocalID()] = ref
	return ref, nil
}

func (w *mrWorld) Post(now mr.Time, ref ConnRef, op Op, n int, id uint32) error {
	c := &w.conns[ref]
	if !c.c.Established() || len(c.held) > 0 {
		if c.c.State() != "connecting" && len(c.held) == 0 {
			return mr.ErrNotUsable
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

func (w *mrWorld) post(now mr.Time, c *mrConn, op Op, n int, id uint32) error {
	h, peer := w.hosts[c.src], w.hosts[c.dst]
	wr, err := sendWR(op, id, h.src.SGE(0, n), peer.dst.Addr(), peer.dst.RKey())
	if err != nil {
		return fmt.Errorf("metaroce: %w", err)
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
func (h *mrHost) recvWR(n int) mr.RecvWR {
	if n == 0 {
		return mr.RecvWR{}
	}
	return mr.RecvWR{Local: h.dst.SGE(0, n)}
}

func (w *mrWorld) Poll(now mr.Time, hi int, sink func(Completion)) {
	h := w.hosts[hi]
	if len(h.waiting) > 0 {
		w.release(now, h)
	}
	for {
		rc, ok := h.ep.Accept()
		if !ok {
			break
		}
		w.accept(now, hi, rc)
	}
	for h.scq.Len() > 0 {
		k := h.scq.Poll(h.wcs)
		for _, wc := range h.wcs[:k] {
			ref, ok := h.dialed[wc.Conn]
			if !ok {
				continue
			}
			op, id := splitWRID(wc.WRID)
			okWC := wc.Status == mr.StatusSuccess
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
			ref, ok := h.accepted[wc.Conn]
			if !ok {
				continue
			}
			c := &w.conns[ref]
			id := wc.Imm
			if wc.Status != mr.StatusFlushed {
				// Keep the receive queue full: one receive back per one used.
				_ = c.rqp.PostRecv(now, h.recvWR(w.recvLen))
				if w.recvIDs {
					id = c.ids.pop()
				}
			}
			sink(Completion{Conn: ref, Recv: true, ID: id, Bytes: int(wc.ByteLen), OK: wc.Status == mr.StatusSuccess})
		}
	}
}

// release posts the held messages of connections that are now up.
func (w *mrWorld) release(now mr.Time, h *mrHost) {
	keep := h.waiting[:0]
	for _, ref := range h.waiting {
		c := &w.conns[ref]
		if !c.c.Established() {
			if c.c.State() == "connecting" {
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

// accept matches a connection host hi accepted to the Dial that opened it
// (the dialer's connection id is the accepted one's remote id) and gives
// it its queue pair and receives, before any data can arrive: the ACCEPT
// has not even left yet.
func (w *mrWorld) accept(now mr.Time, hi int, rc *mr.Conn) {
	peer := int(rc.Peer())
	if peer < 0 || peer >= len(w.hosts) {
		return
	}
	ref, ok := w.hosts[peer].dialed[rc.RemoteID()]
	if !ok {
		return
	}
	h := w.hosts[hi]
	c := &w.conns[ref]
	qp, err := rc.CreateQP(0, mr.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return
	}
	c.rc, c.rqp = rc, qp
	h.accepted[rc.LocalID()] = ref
	for i := 0; i < w.recvDepth; i++ {
		_ = qp.PostRecv(now, h.recvWR(w.recvLen))
	}
}

func (w *mrWorld) Delivered(ref ConnRef) uint64 {
	c := &w.conns[ref]
	d := c.c.Counters().PayloadPlaced // READ responses
	if c.rc != nil {
		d += c.rc.Counters().PayloadPlaced
	}
	return d
}

func (w *mrWorld) Counters() []Field {
	var sum mr.ConnCounters
	var rto, probes, restores uint64
	add := func(c *mr.Conn) {
		if c == nil {
			return
		}
		k := c.Counters()
		sum.DataPacketsSent += k.DataPacketsSent
		sum.DataResent += k.DataResent
		sum.Retransmits += k.Retransmits
		sum.SackGaps += k.SackGaps
		sum.PathFailures += k.PathFailures
		sum.PathRerolls += k.PathRerolls
		sum.AcksSent += k.AcksSent
		sum.ECNEchoes += k.ECNEchoes
		sum.RNRNaksSent += k.RNRNaksSent
		sum.Duplicates += k.Duplicates
		for i := 0; i < c.NumPaths(); i++ {
			pc := c.PathCounters(mr.PathID(i))
			rto += pc.RetransmitTimeout
			probes += pc.Probes
			restores += pc.Restores
		}
	}
	for i := range w.conns {
		add(w.conns[i].c)
		add(w.conns[i].rc)
	}
	return []Field{
		{"data_packets", sum.DataPacketsSent}, {"data_resent", sum.DataResent},
		{"retransmits", sum.Retransmits}, {"sack_gaps", sum.SackGaps},
		{"rto_resends", rto}, {"tail_probes", probes}, {"path_failures", sum.PathFailures},
		{"path_restores", restores}, {"path_rerolls", sum.PathRerolls},
		{"acks", sum.AcksSent}, {"ecn_echoes", sum.ECNEchoes}, {"rnr_naks", sum.RNRNaksSent},
		{"duplicates", sum.Duplicates},
	}
}
