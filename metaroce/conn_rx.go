package metaroce

import (
	"math/bits"

	"github.com/metaroce/metaroce/verbs"
)

// verdict is what the receiver did with a sequenced packet.
type verdict uint8

const (
	accepted verdict = iota // placed (or harmless duplicate of finished work): acknowledge
	refused                 // a NAK is queued (or, placeWrite, the sender is left to resend); the PSN stays unacknowledged
	dropped                 // malformed: neither acknowledged nor answered
)

// receive handles a packet whose CRC and header checked out and whose
// dst_conn named c. raw is the packet without the CRC in mode none, nil
// in the sealed modes (dispatch); body what follows the header.
func (c *Conn) receive(now verbs.Time, h *Header, raw, body []byte, rx verbs.RxMeta) {
	if h.Opcode == OpReset {
		// A RESET names, as its source, the connection id it did not know:
		// our peer's id (or 0 for a refused CONNECT), and proves our token
		// (token.go). Anything else is not about this connection; a RESET
		// from an end that lost the connection cannot prove it, and the
		// peer-dead timeout or the peer's new handshake (restart
		// detection) ends the connection instead.
		want, why := c.remote, verbs.FailReset
		if c.state == connConnecting {
			want, why = 0, verbs.FailRefused
		}
		switch {
		case rx.Peer != c.peer || h.SrcConn != want || c.state >= connClosed:
			c.c.StalePackets++
		case !c.proofOK(raw):
			c.c.BadTags++
		default:
			c.fail(verbs.StatusRetryExceeded, why)
		}
		return
	}
	switch c.state {
	case connConnecting:
		if h.Opcode == OpAccept {
			c.onAccept(now, h, raw, body)
		}
		return
	case connEstablished, connClosing:
	default:
		return
	}
	if h.SrcConn != c.remote || h.Incarnation != c.peerInc || rx.Peer != c.peer {
		// Another connection's, an old incarnation's, or from an address
		// that is not the peer's (a CLOSE from elsewhere ends nothing).
		c.c.StalePackets++
		return
	}
	if h.Opcode.tagged() {
		if !c.proofOK(raw) {
			c.c.BadTags++ // not from the peer: it does not count as anything
			return
		}
		c.heard(now)
		c.provenByTag()
	} else if c.halfOpen.in && c.rx == nil {
		// A sequenced packet before anything else, and no path state to
		// check it against (admission.go): it must lie in the window of
		// a path's first PSNs, which only the holder of our token can
		// compute (token.go); then the peer is there. (With path state,
		// made by local work, onSequenced checks it and proves.)
		if !c.inFirstWindow(h) {
			c.c.OutOfWindow++
			return
		}
		c.prove()
	}
	c.c.RxPackets++
	c.c.RxBytes += uint64(HeaderLen + len(body) + CRCLen)
	if c.state == connClosing {
		if h.Opcode == OpCloseAck || h.Opcode == OpClose {
			if h.Opcode == OpClose {
				c.ep.replyProving(reply{peer: c.peer, op: OpCloseAck, dst: c.remote, src: c.local, tok: c.tokRemote, hasTok: true})
			}
			c.finish(connClosed)
		}
		return
	}
	switch h.Opcode {
	case OpAck:
		c.onAck(now, body)
	case OpNak:
		c.onNak(now, body)
	case OpKeepalive:
		c.queueCtrl(ctrlPkt{op: OpAck})
	case OpClose:
		c.ep.replyProving(reply{peer: c.peer, op: OpCloseAck, dst: c.remote, src: c.local, tok: c.tokRemote, hasTok: true})
		c.abort(verbs.StatusFlushed, verbs.StatusFlushed)
		c.finish(connClosed)
	case OpAccept, OpCloseAck:
		// A duplicate ACCEPT, or a CLOSE_ACK we did not ask for.
	default:
		if h.Opcode.Sequenced() {
			c.onSequenced(now, h, raw, body, rx)
		}
	}
}

// heard records that a packet that passed every check came from the
// peer: the first one on an accepted connection proves the peer is there
// (admission.go), and each one refreshes the peer-liveness timer (§7.3).
// Packets that fail a check (a tag, a sequence window, a generation) do
// neither, so a forger cannot keep a dead peer looking alive.
func (c *Conn) heard(now verbs.Time) {
	if c.halfOpen.in {
		c.prove()
	}
	c.lastRx = now
	if !c.outbound && c.connectSentAt != 0 {
		// The acceptor's first hint of the RTT: from its ACCEPT to the
		// first packet of the established connection. The peer may have
		// waited before sending (an application that connects and sends
		// later), so this is an upper bound, not a sample: it must not
		// enter the smoothed estimate, whose variance term would turn an
		// idle millisecond into an RTO of three. Until a real sample
		// comes, it bounds the RTO instead (rttEstimator.bound), so an
		// acceptor whose first data packets are lost (it has sent nothing
		// before) waits about one RTT, not InitialRTO.
		c.rtt.bound = min(now.Sub(c.connectSentAt), c.ep.cfg.InitialRTO)
		c.connectSentAt = 0
	}
}

// onAccept completes an outgoing connection. The ACCEPT must prove our
// token, which only our CONNECT carried: it comes from whoever received
// it.
func (c *Conn) onAccept(now verbs.Time, h *Header, raw, body []byte) {
	var b ConnectBody
	if err := b.Decode(body); err != nil || h.SrcConn == 0 {
		c.c.Malformed++
		return
	}
	if !c.proofOK(raw) {
		c.c.BadTags++
		return
	}
	if int(b.Paths) > c.ep.cfg.Paths || int(b.MTU) > c.ep.cfg.MTU || int(b.Planes) > c.ep.cfg.Planes ||
		int(b.Streams) > c.ep.cfg.Streams {
		// ACCEPT may only lower what we proposed.
		c.c.Malformed++
		return
	}
	c.remote, c.peerInc, c.peerNode, c.tokRemote = h.SrcConn, h.Incarnation, b.Node, b.Token
	c.ep.peerSeen(c)
	c.establish(now, &b)
	c.proveAt = now.Add(proveDelay) // amplification.go
	if c.tries == 1 && now > c.connectSentAt {
		// One CONNECT, one ACCEPT: an unambiguous first RTT sample, so
		// that a path whose first packets are all lost (an incast's
		// first burst) times out after an RTO, not after InitialRTO.
		// Only the RTO takes it: a CONNECT and its ACCEPT are small, and
		// on slow links a data packet's RTT is much longer, so it would
		// understate the connection's smallest RTT (minRTT).
		c.rtt.sample(now.Sub(c.connectSentAt))
	}
}

func (c *Conn) onAck(now verbs.Time, body []byte) {
	n, err := DecodeAckPrefix(body)
	if err != nil {
		c.c.Malformed++
		return
	}
	c.c.AcksReceived++
	c.fastest = c.fastestPath()
	if checkFastest != nil {
		checkFastest(c, c.fastest)
	}
	var b AckBlock
	o := AckPrefixLen
	for i := 0; i < n; i++ {
		l, _ := b.Decode(body[o:]) // DecodeAckPrefix checked every block
		o += l
		c.onAckBlock(now, &b)
	}
}

// onAckBlock retires what one path's ACK block acknowledges and resends,
// at once and on the same path, every packet that a later-sent packet
// overtook: within one path the fabric keeps order, so that packet is lost.
func (c *Conn) onAckBlock(now verbs.Time, b *AckBlock) {
	if int(b.Path) >= len(c.tx) {
		c.c.Malformed++
		return
	}
	p := &c.tx[b.Path]
	if b.PathGen != p.gen {
		p.c.StaleGeneration++
		return
	}
	if p.next.Less(b.Cum) {
		c.c.Malformed++ // acknowledges PSNs never sent
		return
	}
	c.c.AckBlocksReceived++
	c.pathChanged(p) // retires, samples, progress, restore, failure, re-roll
	// The peer is in this generation: stamps again (genproof.go).
	p.unproven = false
	acked := 0
	var newest verbs.Time // the latest transmission the block retires
	retire := func(psn PSN) {
		if s := p.slot(psn); s.kind != slotFree && s.sent {
			newest = max(newest, s.sentAt)
			c.retire(p, s)
			acked++
		}
	}
	for psn := p.una; psn.Less(b.Cum); psn++ {
		retire(psn)
	}
	for w := 0; w < sackWords; w++ {
		for v := b.Sack[w]; v != 0; v &= v - 1 {
			psn := b.Cum + 1 + PSN(w*64+bits.TrailingZeros64(v))
			if !psn.Less(p.next) {
				break
			}
			if !psn.Less(p.una) {
				retire(psn)
			}
		}
	}
	for p.una.Less(p.next) && p.slot(p.una).kind == slotFree {
		p.una++
	}
	marked := 0
	if d := b.ECNCount - p.ecnSeen; d > 0 && d < 1<<31 {
		p.c.ECNEchoes += uint64(d)
		c.c.ECNEchoes += uint64(d)
		p.ecnSeen = b.ECNCount
		marked = int(d)
	}
	c.limit.setHint(&c.ep.cfg, now, b.RateHint)
	if acked > 0 && b.TSEcho > 0 && b.TSEcho <= now {
		p.sample(now.Sub(b.TSEcho))
		c.rtt.sample(now.Sub(b.TSEcho))
		c.limit.sample(now.Sub(b.TSEcho))
		c.updateSpeed(p)
	}
	if acked > 0 {
		c.checkSpurious(now, p, b.TSEcho)
	}
	if p.cc.onAck(&c.ep.cfg, now, acked, marked, c.pathSRTT(p)) {
		c.checkReroll(p)
	}
	if acked > 0 {
		p.lastProgress = now
		p.lastAck = now
		p.timeouts = 0
		if p.failed {
			c.restore(now, p)
		} else {
			c.count(p)
		}
	}
	echo := b.TSEcho
	if echo == 0 {
		// Nothing stamped of this generation has reached the peer: the
		// round that proves it (genproof.go). For loss detection the
		// latest transmission this block retires stands in for the echo
		// (what went before it on the path and is not acknowledged was
		// lost); it may name a resend whose original was acknowledged,
		// which costs at most a needless resend, and never an RTT sample.
		echo = newest
	}
	if echo <= p.lastStamp && echo > p.delivered {
		p.delivered = echo
		for psn := p.una; psn.Less(p.next); psn++ {
			s := p.slot(psn)
			if s.kind != slotFree && s.sent && !s.pending && s.sentAt < p.delivered {
				s.pending = true
				p.c.SackGaps++
				p.c.RetransmitSACK++
				c.c.SackGaps++
				c.resend.Push(resendRef{path: p.id, gen: p.gen, psn: psn})
				c.onLoss(now, p)
				if p.failed {
					// Too lossy: what it held has moved to other paths.
					return
				}
			}
		}
	}
	c.finishReroll(p)
}

// retire settles an acknowledged slot.
func (c *Conn) retire(p *txPath, s *txSlot) {
	switch s.kind {
	case slotData:
		m := s.msg
		m.outstanding--
		m.qp.progressed(c.lastRx) // lastRx: the time of the ACK being processed
		if (!s.nop || s.moved) && s.attempt == m.attempt && m.status == verbs.StatusSuccess && !m.finished {
			if !m.moved || m.acked.add(int(s.offset/uint32(c.mtu))) {
				m.ackedChunks++
			}
			c.checkDone(m)
		} else {
			c.checkFailed(m)
		}
		c.releaseMsg(m)
	case slotReadResp:
		j := s.job
		j.outstanding--
		j.ackedChunks++
		c.maybeReleaseJob(j)
	}
	*s = txSlot{}
	p.inUse--
	if !p.uncounted {
		c.limit.inflight--
	}
	c.limit.acked()
	p.cc.delivered()
}

// onNak acts on a refused packet: the message fails, or (receiver not
// ready) restarts after a back-off. Either way the refused PSN is filled
// with a NOP so the path's sequence moves on.
func (c *Conn) onNak(now verbs.Time, body []byte) {
	var n NakBody
	if err := n.Decode(body); err != nil || int(n.Path) >= len(c.tx) {
		c.c.Malformed++
		return
	}
	c.c.NaksReceived++
	p := &c.tx[n.Path]
	if n.PathGen != p.gen || n.PSN.Less(p.una) || !n.PSN.Less(p.next) {
		return
	}
	s := p.slot(n.PSN)
	if s.kind != slotData || !s.sent || s.moved {
		return // a moved original: its copy gets the answer
	}
	m := s.msg
	if m.qp.id != n.Stream || m.seq != n.MsgSeq {
		c.c.Malformed++
		return
	}
	if !s.nop && s.attempt == m.attempt && !m.finished && m.status == verbs.StatusSuccess {
		if n.Status == verbs.StatusReceiverNotReady {
			c.restartAfterRNR(now, m, n.RNRWait)
		} else {
			c.failMsg(m, n.Status)
		}
	}
	s.nop = true
	if !s.pending {
		s.pending = true
		c.resend.Push(resendRef{path: p.id, gen: p.gen, psn: n.PSN})
	}
}

// restartAfterRNR sends message m again from its start after a back-off,
// or fails it when the retries are used up.
func (c *Conn) restartAfterRNR(now verbs.Time, m *txMsg, hint uint32) {
	cfg := &c.ep.cfg
	m.rnrTries++
	m.qp.progressed(now) // the responder answered
	if limit := c.rnrRetries(m.qp); limit >= 0 && m.rnrTries > limit {
		c.failMsg(m, verbs.StatusRNRRetryExceeded)
		c.breakStream(m.qp)
		return
	}
	c.c.RNRRetries++
	m.attempt++
	m.segOff, m.segDone, m.ackedChunks = 0, false, 0
	m.moved = false
	// The back-off doubles per retry, up to 2^16 times the first one.
	wait := cfg.RNRBackoff << min(m.rnrTries-1, 16)
	if h := verbs.Time(hint); m.qp.timers.set && h > 0 {
		wait = h.Sub(0) // IB: the responder's min_rnr_timer, every time
	} else if h > verbs.Time(wait) {
		wait = h.Sub(0)
	}
	q := m.qp
	q.blockedUntil = now.Add(wait)
	q.agg.free = false
	c.streamChanged(q)
	idx := int(m.seq - q.sqBase)
	if idx < q.segIdx {
		q.segIdx = idx
	}
	c.activate(q)
}

// onSequenced runs a sequenced packet through its path's scoreboard and,
// if it is new, places it. raw is as for receive.
func (c *Conn) onSequenced(now verbs.Time, h *Header, raw, body []byte, rx verbs.RxMeta) {
	if int(h.Path) >= len(c.rx) {
		c.c.Malformed++
		return
	}
	r := &c.rx[h.Path]
	if h.PathGen != r.gen {
		if int16(h.PathGen-r.gen) < 0 {
			r.c.StaleGeneration++
			return
		}
		if !r.newGeneration(h.PathGen, h.PSN) || !c.genProofOK(h, raw) {
			// Not a generation the peer's own restarts produce
			// (generation.go), or without the proof of our token that
			// they carry (genproof.go): dropped, the path goes on as it
			// was.
			r.c.GenerationsRefused++
			c.c.StalePackets++
			return
		}
		// The sender restarted this path's sequence space (failure or a
		// new entropy): not a loss, just a new space from its first PSN.
		r.restart(h.PathGen)
		r.unacked, r.tsEcho = 0, 0
	}
	switch r.sb.classify(h.PSN) {
	case psnBeyond:
		r.c.OutOfWindowReceived++
		return
	case psnDuplicate:
		if int32(h.PSN-r.sb.cum) < -SackBits {
			// Further behind than any resend of the peer can be (it
			// keeps at most SackBits PSNs in flight): not the peer's.
			r.c.OutOfWindowReceived++
			return
		}
		// The sender resent because our ACK was lost or late: answer at
		// once, echoing this packet's timestamp (not an older one, which
		// would inflate the sender's RTT estimate).
		c.heard(now)
		r.c.DuplicatesReceived++
		c.c.Duplicates++
		r.tsEcho = max(r.tsEcho, h.stamp())
		c.queueAck(now, h.Path, true)
		return
	}
	// New, in the window of a generation the peer's own restarts made:
	// the peer's (token.go), whatever placement then decides.
	c.heard(now)
	v := accepted
	if h.Opcode != OpNop {
		v = c.place(now, h, body)
	}
	switch v {
	case dropped:
		c.c.Malformed++
		return
	case refused:
		return
	}
	r.sb.mark(h.PSN)
	c.ep.share.onReceive(&c.ep.cfg, c, now, HeaderLen+len(body)+CRCLen, rx.CE, h.stamp())
	r.c.RxPackets++
	r.c.RxBytes += uint64(len(body))
	if rx.CE {
		r.ecn++
		r.c.CEReceived++
	}
	r.tsEcho = max(r.tsEcho, h.stamp())
	r.unacked++
	c.queueAck(now, h.Path, h.Flags&FlagAckReq != 0)
}

// nak queues a refusal of the packet h.
func (c *Conn) nak(h *Header, m *MsgHeader, st verbs.Status) verdict {
	switch st {
	case verbs.StatusRemoteAccessError:
		c.c.AccessViolations++
	case verbs.StatusLocalLengthError:
		c.c.LengthErrors++
	case verbs.StatusReceiverNotReady:
		c.c.RNRNaksSent++
	}
	nb := NakBody{Path: h.Path, PathGen: h.PathGen, PSN: h.PSN, Stream: m.Stream, Status: st, MsgSeq: m.MsgSeq}
	if st == verbs.StatusReceiverNotReady {
		nb.RNRWait = c.rnrNakWait(m.Stream)
	}
	c.queueCtrl(ctrlPkt{op: OpNak, nak: nb})
	if st != verbs.StatusReceiverNotReady && h.Opcode != OpReadResp {
		// The message ends here (the sender fails it): its window entry
		// is done, so later messages of the stream are not held by it.
		if q := c.QP(m.Stream); q != nil && !q.destroyed {
			c.winFail(q, m.MsgSeq)
			c.advance(q)
		}
	}
	return refused
}

// place validates a message packet against the receiver's state and, only
// if every check passes, copies its payload to its final address.
func (c *Conn) place(now verbs.Time, h *Header, body []byte) verdict {
	var m MsgHeader
	n, err := m.Decode(h.Opcode, h.Flags, body)
	if err != nil {
		return dropped
	}
	payload := body[n:]
	q := c.QP(m.Stream)
	if q != nil && q.destroyed && !lateCopy(h.Opcode, &m, q) {
		q = nil // Destroy: the stream is closed at this end
	}
	if h.Opcode == OpReadResp {
		return c.placeReadResp(q, &m, payload)
	}
	if q == nil || int32(m.MsgSeq-q.rxw.base) >= MsgWindow {
		// The peer has not opened this stream yet, or the message is
		// beyond the stream's window (rxWindow): retry later.
		return c.nak(h, &m, verbs.StatusReceiverNotReady)
	}
	switch h.Opcode {
	case OpWrite, OpWriteImm:
		// A WRITE_IMM first claims its receive, so that any refusal below
		// consumes it (with an error) and later receives stay aligned.
		var slot *recvSlot
		if h.Opcode == OpWriteImm {
			var v verdict
			if slot, v = c.claimRecv(h, &m, q); slot == nil {
				return v
			}
		}
		chunk, ok := chunkOf(m.Offset, len(payload), m.MsgLen, c.mtu)
		if !ok {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecvWriteImm, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		}
		start := m.RemoteAddr - uint64(m.Offset)
		mr, _, ok := c.ep.regions.CheckRemote(q.pd, m.RKey, start, uint64(m.MsgLen), verbs.AccessRemoteWrite)
		if start > m.RemoteAddr || !ok {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecvWriteImm, verbs.StatusRemoteAccessError, verbs.StatusLocalAccessError)
		}
		if slot != nil && !c.startRecv(slot, h, &m, verbs.WCRecvWriteImm) {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecvWriteImm, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		}
		if slot != nil {
			q.rxw.bindRecv(m.MsgSeq, m.RecvSeq)
		}
		e, v := c.admit(&q.rxw, m.MsgSeq, m.MsgLen, chunk)
		switch v {
		case winBeyond:
			return c.nak(h, &m, verbs.StatusReceiverNotReady)
		case winMismatch:
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecvWriteImm, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		case winDup:
			c.c.DuplicateChunks++
		default:
			dst, _ := mr.Span(m.RemoteAddr, uint64(len(payload)))
			if !c.placeWrite(e, chunk, mr, dst, payload) {
				return refused // not acknowledged: the sender resends it
			}
			if e.done {
				c.advance(q)
			}
		}
	case OpSend, OpSendImm:
		slot, v := c.claimRecv(h, &m, q)
		if slot == nil {
			return v
		}
		chunk, ok := chunkOf(m.Offset, len(payload), m.MsgLen, c.mtu)
		if !ok {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecv, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		}
		if !slot.started && m.MsgLen > uint32(len(slot.buf)) {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecv, verbs.StatusLocalLengthError, verbs.StatusLocalLengthError)
		}
		if !c.startRecv(slot, h, &m, verbs.WCRecv) {
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecv, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		}
		q.rxw.bindRecv(m.MsgSeq, m.RecvSeq)
		e, wv := c.admit(&q.rxw, m.MsgSeq, m.MsgLen, chunk)
		switch wv {
		case winBeyond:
			return c.nak(h, &m, verbs.StatusReceiverNotReady)
		case winMismatch:
			return c.refuseRecv(h, &m, q, slot, verbs.WCRecv, verbs.StatusRemoteInvalidReq, verbs.StatusRemoteInvalidReq)
		case winDup:
			c.c.DuplicateChunks++
		default:
			if slot.mr.Placeable() { // else deregistered: the receive fails (verbs.MemoryRegion.Deregister)
				copy(slot.buf[m.Offset:], payload)
				c.c.PayloadPlaced += uint64(len(payload))
			}
			if e.done {
				c.advance(q)
			}
		}
	case OpReadReq:
		mr, src, ok := c.ep.regions.CheckRemote(q.pd, m.RKey, m.RemoteAddr, uint64(m.MsgLen), verbs.AccessRemoteRead)
		if !ok {
			return c.nak(h, &m, verbs.StatusRemoteAccessError)
		}
		e, _ := q.rxw.entry(m.MsgSeq)
		if e == nil || e.used {
			// A copy of a READ request already taken (moved, or resent
			// after a lost ACK): it is being served, or was.
			c.c.DuplicateChunks++
			return accepted
		}
		if c.jobs.Len()+c.deferredJobs >= maxReadJobs {
			// Like a NIC's responder resources: ask the requester to retry.
			return c.nak(h, &m, verbs.StatusReceiverNotReady)
		}
		j := c.newJob()
		*j = readJob{stream: m.Stream, seq: m.MsgSeq, mr: mr, src: src, nChunks: chunksFor(m.MsgLen, c.mtu)}
		// Served once every earlier message of the stream is done
		// (rxWindow): it reads what earlier WRITEs wrote.
		e.used, e.job = true, j
		c.deferredJobs++
		c.advance(q)
	default:
		return dropped
	}
	return accepted
}

// lateCopy reports whether m, on destroyed queue pair q, is a copy of a
// WRITE or SEND (with or without immediate) that had completed at this end
// before Destroy: its sequence is below the window's base, which Destroy
// keeps (clearWindow). Such a copy goes the way a live queue pair's late
// copy goes, acknowledged (or refused as its original was) with nothing
// placed, since the window and the receive queue both take it for a
// duplicate. It exists because the original's ACK was lost, or outrun by
// the sender's timer: a program that destroys its queue pair as soon as
// its last receive completes (ibv_rc_pingpong does) would otherwise have
// the copy answered receiver-not-ready, and the sender restart a message
// that had been delivered until its retries ran out. READ requests are not
// answered so: their responses are gone with the window.
func lateCopy(op Opcode, m *MsgHeader, q *QueuePair) bool {
	switch op {
	case OpWrite, OpWriteImm, OpSend, OpSendImm:
		return int32(m.MsgSeq-q.rxw.base) < 0
	}
	return false
}

// refuseRecv NAKs a packet with wire status wire and, if it had claimed a
// receive, completes that receive with local status local: the receive is
// consumed either way, so the stream's later receives stay aligned, and a
// late copy of the packet gets the same NAK.
func (c *Conn) refuseRecv(h *Header, m *MsgHeader, q *QueuePair, slot *recvSlot, op verbs.WCOpcode, wire, local verbs.Status) verdict {
	if slot != nil {
		if !slot.started {
			slot.started, slot.opcode = true, op
		}
		slot.done, slot.status, slot.wire = true, local, wire
		q.completeRecvs()
	}
	return c.nak(h, m, wire)
}

// claimRecv finds the posted receive a receive-consuming packet lands in,
// without changing it. It returns nil with the verdict when the packet must
// not be placed.
func (c *Conn) claimRecv(h *Header, m *MsgHeader, q *QueuePair) (*recvSlot, verdict) {
	d := int32(m.RecvSeq - q.rqBase)
	if d < 0 {
		// The receive was completed: a late copy. Repeat its error, or
		// acknowledge it without placing anything.
		if st, ok := c.lookupError(m.Stream, m.RecvSeq); ok {
			return nil, c.nak(h, m, st)
		}
		return nil, accepted
	}
	if int(d) >= q.rq.Len() {
		return nil, c.nak(h, m, verbs.StatusReceiverNotReady)
	}
	s := q.rq.At(int(d))
	if s.done {
		if s.status != verbs.StatusSuccess {
			return nil, c.nak(h, m, s.wire)
		}
		return nil, accepted
	}
	return s, accepted
}

// startRecv binds a receive to the message of its first packet, once every
// check has passed, or checks that a later packet describes the same
// message.
func (c *Conn) startRecv(s *recvSlot, h *Header, m *MsgHeader, op verbs.WCOpcode) bool {
	if s.started {
		return s.msgLen == m.MsgLen && s.opcode == op
	}
	s.started, s.msgLen, s.opcode = true, m.MsgLen, op
	s.hasImm = h.Opcode == OpSendImm || h.Opcode == OpWriteImm
	s.imm = m.Imm
	return true
}

// placeReadResp lands a READ response chunk in the requester's buffer.
func (c *Conn) placeReadResp(q *QueuePair, m *MsgHeader, payload []byte) verdict {
	if q == nil {
		return dropped
	}
	idx := int32(m.MsgSeq - q.sqBase)
	if idx < 0 || int(idx) >= q.sq.Len() {
		return accepted // a late copy of a finished READ
	}
	msg := *q.sq.At(int(idx))
	if msg.op != OpReadReq {
		return dropped
	}
	if msg.finished || msg.status != verbs.StatusSuccess {
		return accepted
	}
	if m.MsgLen != msg.length {
		return dropped
	}
	q.progressed(c.lastRx) // a READ response acknowledges the READ
	if m.Imm != 0 {
		// The responder ends the READ (see MsgHeader: its source was
		// deregistered while it served it).
		st := verbs.Status(m.Imm)
		if len(payload) != 0 || !nakable(st) || st == verbs.StatusReceiverNotReady {
			return dropped
		}
		c.failMsg(msg, st)
		return accepted
	}
	chunk, ok := chunkOf(m.Offset, len(payload), m.MsgLen, c.mtu)
	if !ok {
		return dropped
	}
	if msg.placed.add(chunk) {
		if msg.mr.Placeable() { // else deregistered: the READ fails (verbs.MemoryRegion.Deregister)
			copy(msg.local[m.Offset:], payload)
			c.c.PayloadPlaced += uint64(len(payload))
		}
		c.checkDone(msg)
	}
	return accepted
}
