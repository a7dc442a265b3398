package sim

import (
	"errors"
	"fmt"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
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

func init() { Register(metaroceTransport{}) }

// MetaRoCEParams is the transport.metaroce section of an experiment file.
// Zero values take metaroce.Config's defaults.
type MetaRoCEParams struct {
	// MTU overrides transport.mtu for metaroce only: on an Ethernet
	// fabric with 9000-byte frames metaroce can carry 8 KiB payloads,
	// where RoCEv2's IB MTU stops at 4096.
	MTU             int      `yaml:"mtu"`
	Paths           int      `yaml:"paths"`
	Window          int      `yaml:"window"`
	AckEvery        int      `yaml:"ack_every"`
	AckDelay        Duration `yaml:"ack_delay"`
	InitialRTO      Duration `yaml:"initial_rto"`
	MinRTO          Duration `yaml:"min_rto"`
	MaxRTO          Duration `yaml:"max_rto"`
	PathFailAfter   int      `yaml:"path_fail_after"`
	PathReprobe     Duration `yaml:"path_reprobe"`
	Keepalive       Duration `yaml:"keepalive"`
	PeerDeadTimeout Duration `yaml:"peer_dead_timeout"`
	// Congestion control and path health (metaroce.Config documents each).
	MinWindow       int      `yaml:"min_window"`
	ECNGain         float64  `yaml:"ecn_gain"`
	DisableCC       bool     `yaml:"disable_cc"`
	HintUtilization float64  `yaml:"hint_utilization"`
	HintInterval    Duration `yaml:"hint_interval"`
	InflightRTTs    float64  `yaml:"inflight_rtts"`
	InitialInflight int      `yaml:"initial_inflight"`
	PathLossFail    float64  `yaml:"path_loss_fail"`
	RerollRounds    int      `yaml:"reroll_rounds"`
	// NoRateHints leaves the receiver's link rate unknown to the endpoint,
	// so it gives no rate hints (the senders rely on ECN alone).
	NoRateHints bool `yaml:"no_rate_hints"`
}

// core is the endpoint configuration for these parameters on hosts with
// planes NIC ports of nicGbps each.
func (p *MetaRoCEParams) core(planes, mtu int, nicGbps float64) mr.Config {
	if p.MTU != 0 {
		mtu = p.MTU
	}
	cfg := mr.Config{
		Planes: planes, MTU: mtu, Paths: p.Paths, PathWindow: p.Window,
		AckEvery: p.AckEvery, AckDelay: p.AckDelay.D(), InitialRTO: p.InitialRTO.D(),
		MinRTO: p.MinRTO.D(), MaxRTO: p.MaxRTO.D(), PathFailAfter: p.PathFailAfter,
		PathReprobe: p.PathReprobe.D(), KeepaliveInterval: p.Keepalive.D(),
		PeerDeadTimeout: p.PeerDeadTimeout.D(),
		MinWindow:       p.MinWindow, ECNGain: p.ECNGain, DisableCC: p.DisableCC,
		HintUtilization: p.HintUtilization, HintInterval: p.HintInterval.D(),
		InflightRTTs: p.InflightRTTs, InitialInflight: p.InitialInflight,
		PathLossFail: p.PathLossFail, RerollRounds: p.RerollRounds,
	}
	if !p.NoRateHints {
		// The receiver knows its link: every NIC port together.
		cfg.LinkRateBps = float64(planes) * nicGbps * 1e9
	}
	return cfg
}

// paramKeys names the experiment key of each core field set from them.
var paramKeys = map[string]string{
	"MTU": "mtu", "Paths": "paths", "PathWindow": "window", "AckEvery": "ack_every", "AckDelay": "ack_delay",
	"InitialRTO": "initial_rto", "MinRTO": "min_rto", "MaxRTO": "max_rto",
	"PathFailAfter": "path_fail_after", "PathReprobe": "path_reprobe", "KeepaliveInterval": "keepalive",
	"PeerDeadTimeout": "peer_dead_timeout", "MinWindow": "min_window", "ECNGain": "ecn_gain",
	"HintUtilization": "hint_utilization", "HintInterval": "hint_interval",
	"InflightRTTs": "inflight_rtts", "InitialInflight": "initial_inflight",
	"PathLossFail": "path_loss_fail", "RerollRounds": "reroll_rounds",
}

// CheckParams implements paramsChecker: the core judges the parameters
// when the file is loaded, and the error names the key.
func (metaroceTransport) CheckParams(c *Config, params any) error {
	cfg := params.(*MetaRoCEParams).core(min(c.Topology.Planes, mr.MaxPlanes), c.Transport.MTU, c.Topology.NICGbps)
	err := cfg.Defaults().Validate()
	var ce *mr.ConfigError
	if errors.As(err, &ce) {
		if k, ok := paramKeys[ce.Field]; ok {
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
			scq: verbs.NewCompletionQueue(1024), rcq: verbs.NewCompletionQueue(1024),
			dialed: map[verbs.QPN]ConnRef{}, accepted: map[verbs.QPN]ConnRef{}, byID: map[mr.ConnID]ConnRef{},
			wcs: make([]verbs.WorkCompletion, 64)})
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
	pd       *verbs.ProtectionDomain
	src, dst *verbs.MemoryRegion
	scq, rcq *verbs.CompletionQueue
	dialed   map[verbs.QPN]ConnRef // by the sender's queue pair
	accepted map[verbs.QPN]ConnRef // by the receiver's queue pair
	byID     map[mr.ConnID]ConnRef // dialed connections, by the sender's local connection id
	wcs      []verbs.WorkCompletion
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

func (w *mrWorld) Host(i int) verbs.Transport { return w.hosts[i].ep }

func (w *mrWorld) Dial(now verbs.Time, src, dst int) (ConnRef, error) {
	h := w.hosts[src]
	c, err := h.ep.Connect(now, verbs.PeerHandle(dst))
	if err != nil {
		return -1, err
	}
	qp, err := c.CreateQP(0, verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return -1, err
	}
	ref := ConnRef(len(w.conns))
	w.conns = append(w.conns, mrConn{src: src, dst: dst, c: c, qp: qp})
	h.dialed[qp.QPN()] = ref
	h.byID[c.LocalID()] = ref
	return ref, nil
}

func (w *mrWorld) Post(now verbs.Time, ref ConnRef, op Op, n int, id uint32) error {
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

func (w *mrWorld) post(now verbs.Time, c *mrConn, op Op, n int, id uint32) error {
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
func (h *mrHost) recvWR(n int) verbs.RecvWR {
	if n == 0 {
		return verbs.RecvWR{}
	}
	return verbs.RecvWR{Local: h.dst.SGE(0, n)}
}

func (w *mrWorld) Poll(now verbs.Time, hi int, sink func(Completion)) {
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
func (w *mrWorld) release(now verbs.Time, h *mrHost) {
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
func (w *mrWorld) accept(now verbs.Time, hi int, rc *mr.Conn) {
	peer := int(rc.Peer())
	if peer < 0 || peer >= len(w.hosts) {
		return
	}
	ref, ok := w.hosts[peer].byID[rc.RemoteID()]
	if !ok {
		return
	}
	h := w.hosts[hi]
	c := &w.conns[ref]
	qp, err := rc.CreateQP(0, verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return
	}
	c.rc, c.rqp = rc, qp
	h.accepted[qp.QPN()] = ref
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
			pc := c.PathCounters(verbs.PathID(i))
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
