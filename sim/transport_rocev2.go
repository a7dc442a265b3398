package sim

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// This file is the RoCEv2 baseline's adapter. One rocev2.Endpoint per host
// carries all of the host's RC queue pairs; each connection is one QP at
// each end (RoCEv2 has no multiplexing). Memory and operations are as for
// metaroce (see transport_metaroce.go): each host registers a source
// buffer and one remote-writable region; messages are WRITE_IMMs into the
// peer's region unless workload.ops says otherwise (WRITE, SEND, SEND_IMM
// into the acceptor's posted receives, READ of the peer's region into the
// source buffer).
//
// Planes: a RoCEv2 QP is bound to one NIC port and keeps one UDP source
// port, so it uses one plane for its whole life. On a multi-plane fabric
// the adapter binds connection i (in Dial order) to plane i mod planes, as
// applications spread QPs over a multi-port NIC's ports: the k-th
// connection between a pair of hosts uses plane k mod planes. The rocev2 core
// does not choose planes (its TxMeta.Plane is always 0), so the adapter
// sets it on the way out, looking the plane up by the BTH's destination
// QP and the peer. The rocev2 endpoint paces everything it sends as one
// port at LineRateBps, so the adapter gives it the sum of the host's ports
// (planes × port rate) and caps each QP's DCQCN rate at one port's rate:
// the simulated NIC ports then hold each plane to its own rate.

func init() { Register(rocev2Transport{}) }

// RoCEv2Params is the transport.rocev2 section of an experiment file.
// Zero values take rocev2.Config's defaults (perftest/ConnectX values).
type RoCEv2Params struct {
	AckTimeoutCode uint8 `yaml:"ack_timeout_code"`
	RetryCount     int   `yaml:"retry_count"`
	RNRRetry       int   `yaml:"rnr_retry"`
	AckReqEvery    int   `yaml:"ack_req_every"`
	// DCQCN: false turns congestion control off (the QP always sends at
	// line rate). Default on.
	DCQCN *bool `yaml:"dcqcn"`
	// CNPInterval is DCQCN's CNP interval at the receiver. Default 50us.
	CNPInterval Duration `yaml:"cnp_interval"`
}

type rocev2Transport struct{}

func (rocev2Transport) Name() string    { return "rocev2" }
func (rocev2Transport) UDPPort() uint16 { return rocev2.UDPPort }
func (rocev2Transport) NewParams() any  { return &RoCEv2Params{} }

func (rocev2Transport) PacketLens(mtu int) (int, int) {
	return rocev2.BTHLen + rocev2.RETHLen + mtu + rocev2.ICRCLen, rocev2.BTHLen + 4 + rocev2.ICRCLen
}

func rocev2IP(h verbs.PeerHandle) rocev2.IPv4 {
	ip := hostIP(int32(h), 0)
	return rocev2.IPv4{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}
}

func (rocev2Transport) NewWorld(env WorldEnv, params any) (World, error) {
	p := params.(*RoCEv2Params)
	w := &rcWorld{recvDepth: 2*env.Outstanding + 8, planes: env.Planes, perPair: map[[2]int]int{},
		recvLen: recvLen(env), recvIDs: hasOp(env.Ops, OpSend)}
	srcAccess, dstAccess := memAccess(env.Ops)
	for h := 0; h < env.Hosts; h++ {
		cfg := rocev2.Config{
			LocalIP: rocev2IP(verbs.PeerHandle(h)), PeerIP: rocev2IP, MTU: env.MTU,
			AckTimeoutCode: p.AckTimeoutCode, RetryCount: p.RetryCount, RNRRetry: p.RNRRetry,
			AckReqEvery: p.AckReqEvery, AcceptIncoming: true, LineRateBps: float64(env.Planes) * env.NICGbps * 1e9,
		}
		cfg.DCQCN.MaxRateBps = env.NICGbps * 1e9
		if p.DCQCN != nil && !*p.DCQCN {
			cfg.DCQCN.Disable = true
		}
		cfg.DCQCN.CNPInterval = time.Duration(p.CNPInterval)
		ep, err := rocev2.NewEndpoint(cfg)
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
		host := &rcHost{ep: ep, pd: pd, src: src, dst: dst,
			scq: verbs.NewCompletionQueue(1024), rcq: verbs.NewCompletionQueue(1024),
			dialed: map[uint32]ConnRef{}, accepted: map[uint32]ConnRef{}, plane: map[rcKey]uint8{},
			wcs: make([]verbs.WorkCompletion, 64)}
		host.tr = rcPlaned{host}
		w.hosts = append(w.hosts, host)
	}
	return w, nil
}

type rcWorld struct {
	perPair   map[[2]int]int // connections dialed so far, by (src, dst)
	hosts     []*rcHost
	conns     []rcConn
	recvDepth int
	planes    int
	recvLen   int  // bytes of each posted receive (0 unless SENDs are posted)
	recvIDs   bool // SENDs are posted: track ids for their receive completions
}

// rcKey names a QP's traffic as the sender sees it: the peer and the
// peer's QP number (the BTH's DestQP).
type rcKey struct {
	peer verbs.PeerHandle
	qpn  uint32
}

type rcHost struct {
	ep       *rocev2.Endpoint
	tr       verbs.Transport
	pd       *verbs.ProtectionDomain
	src, dst *verbs.MemoryRegion
	scq, rcq *verbs.CompletionQueue
	dialed   map[uint32]ConnRef // by the dialer's QPN
	accepted map[uint32]ConnRef // by the acceptor's QPN
	plane    map[rcKey]uint8    // the plane of every QP that has one other than 0
	wcs      []verbs.WorkCompletion
}

type rcConn struct {
	src, dst int
	plane    uint8
	c        *rocev2.Conn
	qp       *rocev2.QueuePair
	rc       *rocev2.Conn
	rqp      *rocev2.QueuePair
	ids      idQueue // ids of posted messages that use a receive (when recvIDs)
}

// rcPlaned is a host's endpoint with the plane of each QP filled in.
type rcPlaned struct{ h *rcHost }

func (p rcPlaned) Receive(now verbs.Time, pkt []byte, rx verbs.RxMeta) { p.h.ep.Receive(now, pkt, rx) }
func (p rcPlaned) NextDeadline() verbs.Time                            { return p.h.ep.NextDeadline() }
func (p rcPlaned) OnTimer(now verbs.Time)                              { p.h.ep.OnTimer(now) }
func (p rcPlaned) MaxPacketLen() int                                   { return p.h.ep.MaxPacketLen() }

func (p rcPlaned) NextPacket(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	m, ok := p.h.ep.NextPacket(now, buf)
	if ok && len(p.h.plane) > 0 && m.Len >= rocev2.BTHLen {
		qpn := binary.BigEndian.Uint32(buf[4:8]) & 0xffffff
		m.Plane = verbs.PlaneID(p.h.plane[rcKey{m.Peer, qpn}])
	}
	return m, ok
}

func (w *rcWorld) Host(i int) verbs.Transport { return w.hosts[i].tr }

func (w *rcWorld) Dial(now verbs.Time, src, dst int) (ConnRef, error) {
	h := w.hosts[src]
	c, err := h.ep.Connect(now, verbs.PeerHandle(dst))
	if err != nil {
		return -1, err
	}
	qp, err := c.CreateQP(verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return -1, err
	}
	ref := ConnRef(len(w.conns))
	k := w.perPair[[2]int{src, dst}]
	w.perPair[[2]int{src, dst}] = k + 1
	w.conns = append(w.conns, rcConn{src: src, dst: dst, c: c, qp: qp, plane: uint8(k % w.planes)})
	h.dialed[c.QPN()] = ref
	return ref, nil
}

func (w *rcWorld) Post(now verbs.Time, ref ConnRef, op Op, n int, id uint32) error {
	c := &w.conns[ref]
	peer := w.hosts[c.dst]
	wr, err := sendWR(op, id, w.hosts[c.src].src.SGE(0, n), peer.dst.Addr(), verbs.RKey(peer.dst.RKey()))
	if err != nil {
		return fmt.Errorf("rocev2: %w", err)
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
func (h *rcHost) recvWR(n int) verbs.RecvWR {
	if n == 0 {
		return verbs.RecvWR{}
	}
	return verbs.RecvWR{Local: h.dst.SGE(0, n)}
}

func (w *rcWorld) Poll(now verbs.Time, hi int, sink func(Completion)) {
	h := w.hosts[hi]
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
			ref, ok := h.dialed[uint32(wc.QPN)]
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
			ref, ok := h.accepted[uint32(wc.QPN)]
			if !ok {
				continue
			}
			c := &w.conns[ref]
			id := wc.Imm
			if wc.Status != verbs.StatusFlushed {
				_ = c.rqp.PostRecv(now, h.recvWR(w.recvLen))
				if w.recvIDs {
					id = c.ids.pop()
				}
			}
			sink(Completion{Conn: ref, Recv: true, ID: id, Bytes: int(wc.ByteLen), OK: wc.Status == verbs.StatusSuccess})
		}
	}
}

// accept matches a QP host hi accepted to the Dial that opened it (the
// dialer's QPN is the accepted QP's remote QPN), binds both ends to the
// connection's plane, and gives it its receives.
func (w *rcWorld) accept(now verbs.Time, hi int, rc *rocev2.Conn) {
	peer := int(rc.Peer())
	if peer < 0 || peer >= len(w.hosts) {
		return
	}
	ref, ok := w.hosts[peer].dialed[rc.RemoteQPN()]
	if !ok {
		return
	}
	h := w.hosts[hi]
	c := &w.conns[ref]
	qp, err := rc.CreateQP(verbs.QPAttr{PD: h.pd, SendCQ: h.scq, RecvCQ: h.rcq})
	if err != nil {
		return
	}
	c.rc, c.rqp = rc, qp
	h.accepted[rc.QPN()] = ref
	if c.plane != 0 {
		// The acceptor's packets go to the dialer's QP; the dialer's to
		// ours. (The dialer's first packets, its CM REQ, go on plane 0:
		// connection management is not bound to a data port.)
		h.plane[rcKey{verbs.PeerHandle(c.src), c.c.QPN()}] = c.plane
		w.hosts[c.src].plane[rcKey{verbs.PeerHandle(hi), rc.QPN()}] = c.plane
	}
	for i := 0; i < w.recvDepth; i++ {
		_ = qp.PostRecv(now, h.recvWR(w.recvLen))
	}
}

func (w *rcWorld) Delivered(ref ConnRef) uint64 {
	c := &w.conns[ref]
	d := c.c.Counters().PayloadPlaced // READ responses
	if c.rc != nil {
		d += c.rc.Counters().PayloadPlaced
	}
	return d
}

func (w *rcWorld) Counters() []Field {
	var s rocev2.ConnCounters
	add := func(c *rocev2.Conn) {
		if c == nil {
			return
		}
		k := c.Counters()
		s.DataPacketsSent += k.DataPacketsSent
		s.DataResent += k.DataResent
		s.Retries += k.Retries
		s.Timeouts += k.Timeouts
		s.NaksSent += k.NaksSent
		s.OutOfSequence += k.OutOfSequence
		s.AcksSent += k.AcksSent
		s.CNPsSent += k.CNPsSent
		s.RateCuts += k.RateCuts
		s.RNRNaksSent += k.RNRNaksSent
		s.Duplicates += k.Duplicates
	}
	for i := range w.conns {
		add(w.conns[i].c)
		add(w.conns[i].rc)
	}
	return []Field{
		{"data_packets", s.DataPacketsSent}, {"data_resent", s.DataResent},
		{"retransmits", s.DataResent}, {"go_back_n", s.Retries}, {"rto_resends", s.Timeouts},
		{"seq_naks", s.NaksSent}, {"out_of_sequence", s.OutOfSequence},
		{"acks", s.AcksSent}, {"cnps", s.CNPsSent}, {"rate_cuts", s.RateCuts},
		{"rnr_naks", s.RNRNaksSent}, {"duplicates", s.Duplicates},
	}
}
