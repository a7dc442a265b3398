package metaroce

import "github.com/metaroce/metaroce/verbs"

// produce writes the connection's next packet into buf, if it has one
// and, on an unproven connection, the anti-amplification budget lets it
// go (amplification.go).
func (c *Conn) produce(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if c.halfOpen.in {
		return c.produceUnproven(now, buf)
	}
	return c.produceNext(now, buf)
}

// produceNext writes the connection's next packet: control packets
// first, then ACKs, resends, packets moved off failed paths and finally
// new data.
func (c *Conn) produceNext(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if c.ctrl.Len() > 0 {
		return c.buildCtrl(now, buf, c.ctrl.Pop())
	}
	if c.state != connEstablished {
		return verbs.TxMeta{}, false
	}
	if c.ackList.Len() > 0 && c.ackDueNow(now) {
		return c.buildAck(now, buf)
	}
	if c.limit.paced(now) {
		return verbs.TxMeta{}, false
	}
	for c.resend.Len() > 0 {
		r := c.resend.Pop()
		if meta, ok := c.buildResend(now, buf, r); ok {
			c.limit.sent(now, meta.Len)
			return meta, true
		}
	}
	for c.moved.Len() > 0 {
		pi := c.pickPath()
		if pi < 0 {
			break
		}
		mp := c.moved.Pop()
		if meta, ok := c.buildMoved(now, buf, &c.tx[pi], mp); ok {
			c.limit.sent(now, meta.Len)
			return meta, true
		}
	}
	return c.buildNew(now, buf)
}

// ackDueNow reports whether some path's ACK must go out now.
func (c *Conn) ackDueNow(now verbs.Time) bool {
	c.acksDueBy(now)
	due := c.agg.acksReady > 0
	if checkAckDue != nil {
		checkAckDue(c, now, due)
	}
	return due
}

func (c *Conn) header(op Opcode, path verbs.PathID, now verbs.Time) Header {
	var h Header
	c.setHeader(&h, op, path, now)
	return h
}

// setHeader makes *h the header c.header returns, field by field: the data
// path builds one per packet, and a Header (nine fields, too many to live
// in registers) assigned from a composite literal is built on the stack
// and copied with wide loads that stall on its narrow stores.
func (c *Conn) setHeader(h *Header, op Opcode, path verbs.PathID, now verbs.Time) {
	h.Opcode, h.Flags, h.DstConn, h.SrcConn = op, 0, c.remote, c.local
	h.Incarnation, h.Path, h.PathGen, h.PSN, h.Timestamp = c.ep.cfg.Incarnation, path, 0, 0, now
	if int(path) < len(c.tx) {
		h.PathGen = c.tx[path].gen
	}
}

func (c *Conn) meta(n int, path verbs.PathID) verbs.TxMeta {
	m := verbs.TxMeta{Len: n, Peer: c.peer, TxRoute: verbs.TxRoute{Path: path, Entropy: c.ep.cfg.EntropyBase + verbs.Entropy(path), ECT: true}}
	if int(path) < len(c.tx) {
		m.Entropy, m.Plane = c.tx[path].entropy, c.tx[path].plane
	} else if int(path) < c.paths {
		// An accepted connection without its path state yet (admission.go):
		// the values its paths will start with.
		m.Entropy, m.Plane = c.pathEntropy(int(path)), verbs.PlaneID(int(path)%c.planes)
	}
	c.c.TxPackets++
	c.c.TxBytes += uint64(n)
	return m
}

func (c *Conn) buildCtrl(now verbs.Time, buf []byte, p ctrlPkt) (verbs.TxMeta, bool) {
	h := c.header(p.op, c.ctrlPath(p.op), now)
	n := HeaderLen
	switch p.op {
	case OpConnect, OpAccept:
		if p.op == OpConnect {
			h.DstConn = 0
		}
		c.connectSentAt = now
		cfg := &c.ep.cfg
		b := ConnectBody{Node: cfg.Node, Paths: uint16(cfg.Paths), MTU: uint16(cfg.MTU),
			Streams: uint16(min(cfg.Streams, 65535)), Planes: uint8(cfg.Planes), Token: c.tokLocal}
		if p.op == OpAccept {
			b.Paths, b.MTU, b.Streams, b.Planes = uint16(c.paths), uint16(c.mtu), uint16(c.streams), uint8(c.planes)
		}
		b.Put(buf[n:])
		n += ConnectLen
	case OpAck:
		// An ACK without blocks: the answer to a keepalive.
		PutAckPrefix(buf[n:], 0)
		n += AckPrefixLen
	case OpNak:
		h.Path = p.nak.Path
		if int(h.Path) < len(c.tx) {
			h.PathGen = c.tx[h.Path].gen
		}
		p.nak.Put(buf[n:])
		n += NakLen
		c.c.NaksSent++
	}
	h.Put(buf)
	if p.op.tagged() {
		c.putProof(buf, n) // an ACCEPT's receiver's token came in its CONNECT
	}
	n = c.seal(now, buf, n)
	return c.meta(n, h.Path), true
}

// ctrlPath picks the path an unsequenced packet travels on. CONNECT tries
// a different path on every attempt and ACCEPT answers on the path the
// request came by, so one dead path cannot prevent a connection; other
// control packets rotate over the paths not judged failed.
func (c *Conn) ctrlPath(op Opcode) verbs.PathID {
	switch op {
	case OpConnect:
		return verbs.PathID(c.tries % c.ep.cfg.Paths)
	case OpAccept:
		return c.acceptPath
	}
	n := c.paths // the negotiated paths, with their state or not yet (admission.go)
	if n == 0 {
		return 0
	}
	for i := 0; i < n; i++ {
		c.ctrlRR = (c.ctrlRR + 1) % n
		if c.ctrlRR >= len(c.tx) || !c.tx[c.ctrlRR].failed {
			break
		}
	}
	return verbs.PathID(c.ctrlRR)
}

// buildAck writes one ACK carrying a block for every path with an
// acknowledgement pending (as many as fit).
func (c *Conn) buildAck(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	first := *c.ackList.Front()
	via := first
	if c.tx[first].failed {
		// Our own traffic found this path dead: send the ACK another way.
		via = c.ctrlPath(OpAck)
	}
	h := c.header(OpAck, via, now)
	h.Put(buf)
	limit := c.ep.MaxPacketLen() - c.ep.sec.trailer
	n := HeaderLen + AckPrefixLen
	count := 0
	hint := c.ep.share.hintMbps(&c.ep.cfg, c)
	for c.ackList.Len() > 0 && count < MaxAckBlocks {
		i := *c.ackList.Front()
		r := &c.rx[i]
		b := AckBlock{Path: i, PathGen: r.gen, Cum: r.sb.cum, Sack: r.sb.sack,
			ECNCount: r.ecn, TSEcho: r.tsEcho, RateHint: hint}
		if n+b.Len() > limit {
			break // the rest go in the next ACK
		}
		c.ackList.Pop()
		n += b.Put(buf[n:])
		count++
		r.unacked, r.ackNow, r.ackDue, r.queued = 0, false, verbs.Never, false
		r.agg.expired = false
		c.ackChanged(i)
	}
	PutAckPrefix(buf[HeaderLen:], count)
	c.putProof(buf, n)
	n = c.seal(now, buf, n)
	c.c.AcksSent++
	return c.meta(n, via), true
}

// occupy assigns the next PSN of p to a new slot and returns both.
func (c *Conn) occupy(now verbs.Time, p *txPath) (PSN, *txSlot) {
	psn := p.next
	p.next++
	if p.inUse == 0 {
		p.lastProgress = now
	}
	p.inUse++
	c.pathChanged(p)
	if !p.uncounted {
		c.limit.inflight++
	}
	return psn, p.slot(psn)
}

// transmit stamps a slot's (re)transmission.
func (c *Conn) transmit(now verbs.Time, p *txPath, s *txSlot) {
	s.sent = true
	s.sentAt = p.lastStamp // stamped by writeSequenced
	s.pending = false
	p.c.TxPackets++
	p.c.TxBytes += uint64(s.length)
}

// revokedSource fails m, whose source was deregistered before all of it
// was sent (verbs.MemoryRegion.Deregister): nothing more is sent from it
// (its packets go out as NOPs), and, as a local protection error does to
// a verbs QP, its stream goes to the error state: the peer's receive, if
// m had started one, never completes, so later messages would no longer
// line up with the peer's receives. m has a packet outstanding (the one
// being built), so it is not finished here.
func (c *Conn) revokedSource(m *txMsg) {
	if m.finished || m.status != verbs.StatusSuccess {
		return
	}
	c.failMsg(m, verbs.StatusLocalProtError)
	c.breakStream(m.qp)
}

// writeSequenced builds the packet a slot stands for: its data if the
// message is still wanted, otherwise a NOP that fills the PSN.
func (c *Conn) writeSequenced(now verbs.Time, buf []byte, p *txPath, psn PSN, s *txSlot, retransmit bool) int {
	c.proveAt = 0 // this packet proves us to an acceptor (amplification.go)
	var h Header
	var mh MsgHeader
	var payload []byte
	if s.kind == slotData && !s.moved && s.msg.op != OpReadReq && s.msg.mr.Revoked() {
		c.revokedSource(s.msg)
	}
	s.moved = false // from now its PSN carries a NOP: its ACK tells nothing of the data
	asNop := s.kind == slotNop || s.nop
	if s.kind == slotData && !asNop && (s.attempt != s.msg.attempt || s.msg.status != verbs.StatusSuccess || s.msg.finished) {
		asNop = true
	}
	switch {
	case asNop:
		c.setHeader(&h, OpNop, p.id, now)
		h.Flags |= FlagAckReq
	case s.kind == slotData:
		m := s.msg
		c.setHeader(&h, m.op, p.id, now)
		// Field by field, as in setHeader (mh is still zero).
		mh.Stream, mh.MsgSeq, mh.RecvSeq, mh.Offset = m.qp.id, m.seq, m.recvSeq, s.offset
		mh.MsgLen, mh.RKey, mh.Imm = m.length, m.rkey, m.imm
		switch m.op {
		case OpReadReq:
			mh.Offset, mh.RemoteAddr = 0, m.remoteAddr
		case OpWrite, OpWriteImm:
			mh.RemoteAddr = m.remoteAddr + uint64(s.offset)
			payload = m.local[s.offset : s.offset+s.length]
		default:
			payload = m.local[s.offset : s.offset+s.length]
		}
		if s.offset+s.length == m.length || m.op == OpReadReq {
			h.Flags |= FlagAckReq
		}
	case s.kind == slotReadResp:
		j := s.job
		c.setHeader(&h, OpReadResp, p.id, now)
		mh.Stream, mh.MsgSeq, mh.Offset, mh.MsgLen = j.stream, j.seq, s.offset, uint32(len(j.src))
		if j.mr.Revoked() {
			// The READ's source was deregistered while being served
			// (verbs.MemoryRegion.Deregister): nothing more is sent from
			// it; the chunk ends the READ with a remote access error
			// instead, as a new READ under the dead key is refused.
			mh.Imm = uint32(verbs.StatusRemoteAccessError)
		} else {
			payload = j.src[s.offset : s.offset+s.length]
		}
		if s.offset+s.length == uint32(len(j.src)) {
			h.Flags |= FlagAckReq
		}
	}
	h.PSN = psn
	h.Timestamp = p.stamp(now)
	if retransmit {
		h.Flags |= FlagRetransmit
	}
	if h.Opcode != OpNop {
		mh.PayloadLen = uint16(len(payload))
		h.Flags |= mh.Flags(h.Opcode) // before the header: its proof covers them
	}
	c.needsGenProof(p, &h)
	h.Put(buf)
	c.putGenProof(buf, h.Flags) // after the header it covers
	n := HeaderLen
	if h.Opcode != OpNop {
		n += mh.Put(h.Opcode, h.Flags, buf[n:])
		if h.Opcode.CarriesPayload() {
			if retransmit {
				c.c.DataResent++
			} else {
				c.c.DataPacketsSent++
			}
		}
		if c.ep.scatterable(len(payload)) {
			return c.ep.scatter(buf, n, payload) // by reference (scatter.go)
		}
		if c.ep.sec.mode == SecurityNone {
			return SealCRCCopy(buf, n, payload) // the payload read once (crc.go)
		}
		n += copy(buf[n:], payload)
	}
	return c.seal(now, buf, n)
}

func (c *Conn) buildResend(now verbs.Time, buf []byte, r resendRef) (verbs.TxMeta, bool) {
	p := &c.tx[r.path]
	if p.gen != r.gen || !r.psn.Less(p.next) || r.psn.Less(p.una) {
		return verbs.TxMeta{}, false
	}
	s := p.slot(r.psn)
	if s.kind == slotFree || !s.pending {
		return verbs.TxMeta{}, false
	}
	retransmit := s.sent // a fresh probe NOP is a first transmission
	n := c.writeSequenced(now, buf, p, r.psn, s, retransmit)
	c.transmit(now, p, s)
	if retransmit {
		c.c.Retransmits++
	}
	return c.meta(n, p.id), true
}

func (c *Conn) buildMoved(now verbs.Time, buf []byte, p *txPath, mp movedPkt) (verbs.TxMeta, bool) {
	if mp.kind == slotData && c.movedObsolete(&mp) {
		mp.msg.outstanding--
		c.checkFailed(mp.msg)
		c.releaseMsg(mp.msg)
		return verbs.TxMeta{}, false
	}
	psn, s := c.occupy(now, p)
	s.fill(mp.kind, mp.msg, mp.job, mp.attempt, mp.offset, mp.length)
	n := c.writeSequenced(now, buf, p, psn, s, true)
	c.transmit(now, p, s)
	c.c.Retransmits++
	return c.meta(n, p.id), true
}

// movedObsolete reports whether a moved copy of a message's packet need
// not be sent: its attempt or message is over, or the original's ACK has
// covered its chunk meanwhile (moveOutstanding keeps the original's slot),
// which counts as a cancelled copy.
func (c *Conn) movedObsolete(mp *movedPkt) bool {
	m := mp.msg
	if mp.attempt != m.attempt || m.status != verbs.StatusSuccess {
		return true
	}
	if m.moved && m.acked.has(int(mp.offset/uint32(c.mtu))) {
		c.c.CopiesCancelled++
		return true
	}
	return m.finished
}

// buildNew sends the next chunk of new data: READ responses and streams
// take turns, streams in round robin.
func (c *Conn) buildNew(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if c.jobs.Len() == 0 && c.active.Len() == 0 {
		return verbs.TxMeta{}, false
	}
	if c.limit.blockedUntil(&c.ep.cfg, now, c.resend.Len()) > now {
		return verbs.TxMeta{}, false
	}
	var pi int
	if c.ep.coal.building {
		pi = c.coalescePath() // a follow-on shares its datagram's path (coalesce.go)
	} else {
		pi = c.pickPath()
	}
	if pi < 0 {
		return verbs.TxMeta{}, false
	}
	p := &c.tx[pi]
	turn := c.jobRR
	c.jobRR = !c.jobRR
	if c.jobRR && c.jobs.Len() > 0 {
		if !c.coalesceFits(c.jobChunkLen(*c.jobs.Front())) {
			c.jobRR = turn // a refused follow-on takes no turn
			return verbs.TxMeta{}, false
		}
		return c.buildJobChunk(now, buf, p)
	}
	for tries := c.active.Len(); tries > 0; tries-- {
		q := c.active.Pop()
		m := q.nextToSegment()
		if m == nil {
			q.active = false
			c.streamChanged(q)
			continue
		}
		if q.blockedUntil > now {
			c.active.Push(q)
			continue
		}
		c.active.Push(q)
		if !c.coalesceFits(c.msgChunkLen(m)) {
			c.jobRR = turn
			return verbs.TxMeta{}, false
		}
		return c.buildMsgChunk(now, buf, p, m)
	}
	if c.jobs.Len() > 0 && c.coalesceFits(c.jobChunkLen(*c.jobs.Front())) {
		return c.buildJobChunk(now, buf, p)
	}
	return verbs.TxMeta{}, false
}

// msgChunkLen is the payload of m's next chunk.
func (c *Conn) msgChunkLen(m *txMsg) uint32 {
	if m.op == OpReadReq {
		return 0
	}
	return min(m.length-m.segOff, uint32(c.mtu))
}

// jobChunkLen is the payload of READ response j's next chunk.
func (c *Conn) jobChunkLen(j *readJob) uint32 {
	return min(uint32(len(j.src))-j.segOff, uint32(c.mtu))
}

// pick runs the picker on plane.
func (c *Conn) pick(plane int) int {
	i := c.picker.pick(plane)
	if checkPick != nil {
		checkPick(c, plane, i)
	}
	return i
}

// nextToSegment returns the first message of q with packets left to build,
// among the MsgWindow oldest uncompleted ones: the peer tracks no more
// (rxWindow), and completeSends reactivates the stream when it opens.
func (q *QueuePair) nextToSegment() *txMsg {
	for q.segIdx < q.sq.Len() && q.segIdx < MsgWindow {
		m := *q.sq.At(q.segIdx)
		if !m.segDone {
			return m
		}
		q.segIdx++
	}
	return nil
}

func (c *Conn) buildMsgChunk(now verbs.Time, buf []byte, p *txPath, m *txMsg) (verbs.TxMeta, bool) {
	psn, s := c.occupy(now, p)
	length := c.msgChunkLen(m)
	s.fill(slotData, m, nil, m.attempt, m.segOff, length)
	m.outstanding++
	m.segOff += length
	if m.op == OpReadReq || m.segOff >= m.length {
		m.segDone = true
	}
	n := c.writeSequenced(now, buf, p, psn, s, false)
	c.transmit(now, p, s)
	c.limit.sent(now, n)
	return c.meta(n, p.id), true
}

func (c *Conn) buildJobChunk(now verbs.Time, buf []byte, p *txPath) (verbs.TxMeta, bool) {
	j := *c.jobs.Front()
	psn, s := c.occupy(now, p)
	length := c.jobChunkLen(j)
	s.fill(slotReadResp, nil, j, 0, j.segOff, length)
	j.outstanding++
	j.segOff += length
	if j.segOff >= uint32(len(j.src)) {
		j.segDone = true
		c.jobs.Pop()
	}
	n := c.writeSequenced(now, buf, p, psn, s, false)
	c.transmit(now, p, s)
	c.limit.sent(now, n)
	return c.meta(n, p.id), true
}

// pickPath chooses the path of a new packet: on the plane the endpoint
// wants next, or, when that plane has no room, on the next plane in turn
// that has. The endpoint hands planes out in rotation across all its
// connections, so its NIC ports are fed evenly: left to each connection's
// picker, the planes of successive packets come out correlated (the
// connections' pickers move in step), one port backs up while the others
// idle, and throughput stops growing with the number of planes.
//
// When the backend reports which ports have room (PlaneSteering), planes
// whose port is backed up are tried only after every ready one.
func (c *Conn) pickPath() int {
	c.flushPaths() // the picker's weights follow the paths' room
	if c.planes <= 1 {
		return c.pick(anyPlane)
	}
	mask := c.ep.ready1
	if mask != 0 {
		for k := 0; k < c.planes; k++ {
			pl := (c.ep.planeRR + k) % c.planes
			if mask&(1<<pl) == 0 {
				continue
			}
			if pi := c.pick(pl); pi >= 0 {
				return pi
			}
		}
	}
	for k := 0; k < c.planes; k++ {
		pl := (c.ep.planeRR + k) % c.planes
		if mask != 0 && mask&(1<<pl) != 0 {
			continue // tried above
		}
		if pi := c.pick(pl); pi >= 0 {
			return pi
		}
	}
	return -1
}
