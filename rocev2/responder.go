package rocev2

import (
	"github.com/metaroce/metaroce/verbs"
)

// The responder executes requests strictly in PSN order, as RC NICs do:
//
//   - PSN == expected: validated, executed (data placed straight into the
//     registered memory or the posted receive), expected PSN advances (by
//     the number of response packets for a READ). An ACK is scheduled when
//     the packet asks for one (AckReq).
//   - PSN > expected (a packet was lost): dropped. The first such packet
//     of a gap episode is answered with a NAK "PSN sequence error" carrying
//     the expected PSN; later ones are dropped silently until the expected
//     PSN arrives.
//   - PSN < expected: a duplicate. SENDs and WRITEs are not executed again;
//     the first duplicate of a run, and any with AckReq, is answered with an
//     ACK of the last executed PSN. A duplicate READ request is executed
//     again (IBA 9.7.5.1.2): its responses are sent anew.
//   - No receive posted for a SEND or WRITE with immediate: RNR NAK with
//     the MinRNRTimer code; nothing of the packet is placed.
//   - Bad rkey, bounds, access or protection domain: NAK remote access
//     error; opcode sequence or length errors: NAK invalid request. Both
//     put the QP in the error state (nothing is placed).
//
// Responses leave in PSN order: an ACK or NAK is held back while READ
// responses for earlier PSNs are still to be sent.

const (
	msgNone uint8 = iota
	msgSend
	msgWrite
)

// maxReadJobs bounds the READ responses queued at a responder.
const maxReadJobs = 1024

type respKind uint8

// Pending responder answers, by priority: a higher one replaces a lower
// one (each NAK also acknowledges every PSN before its own).
const (
	respNone respKind = iota
	respAck
	respNakSeq
	respRNR
	respNakErr
)

// respSlot is the one pending ACK/NAK: answers coalesce.
type respSlot struct {
	kind respKind
	psn  PSN
	syn  Syndrome
}

// readJob is a READ being answered.
type readJob struct {
	psn   PSN
	src   []byte
	mr    *verbs.MemoryRegion
	npkts int
	next  int // next response packet to build
}

func (j *readJob) release() {
	j.mr = nil
}

func (c *Conn) queueResp(kind respKind, psn PSN, syn Syndrome) {
	if kind < c.resp.kind {
		return
	}
	if kind == respAck && c.resp.kind == respAck && psn.Less(c.resp.psn) {
		return
	}
	c.resp = respSlot{kind: kind, psn: psn, syn: syn}
}

// respReady reports whether the pending answer may go now: READ responses
// for earlier PSNs go first.
func (c *Conn) respReady() bool {
	if c.resp.kind == respNone {
		return false
	}
	return c.jobs.Len() == 0 || c.resp.psn.Less(c.jobs.Front().psn)
}

// buildResp writes the pending ACK or NAK.
func (c *Conn) buildResp(buf []byte) int {
	r := c.resp
	c.resp = respSlot{}
	h := BTH{Opcode: OpAcknowledge, PKey: c.ep.cfg.PKey, DestQP: c.rqpn, PSN: r.psn}
	a := AETH{MSN: c.msn}
	switch r.kind {
	case respAck:
		a.Syndrome = SynACK
		c.c.AcksSent++
	case respNakSeq:
		a.Syndrome = SynNAKSequence
		c.c.NaksSent++
	case respRNR:
		a.Syndrome = r.syn
		c.c.RNRNaksSent++
	default:
		a.Syndrome = r.syn
		c.c.ErrorNaksSent++
	}
	h.Put(buf)
	a.Put(buf[BTHLen:])
	return SealICRC(buf, BTHLen+AETHLen, c.txFlow)
}

// buildReadResponse writes the next READ response packet.
func (c *Conn) buildReadResponse(buf []byte) int {
	j := c.jobs.Front()
	k := j.next
	last := k == j.npkts-1
	off := k * c.mtu
	plen := min(c.mtu, len(j.src)-off)
	h := BTH{PKey: c.ep.cfg.PKey, DestQP: c.rqpn, PSN: j.psn.Add(k)}
	switch {
	case j.npkts == 1:
		h.Opcode = OpReadResponseOnly
	case k == 0:
		h.Opcode = OpReadResponseFirst
	case last:
		h.Opcode = OpReadResponseLast
	default:
		h.Opcode = OpReadResponseMid
	}
	pad := padFor(plen)
	h.PadCount = uint8(pad)
	h.Put(buf)
	n := BTHLen
	if opTable[h.Opcode].aeth {
		a := AETH{Syndrome: SynACK, MSN: c.msn}
		a.Put(buf[n:])
		n += AETHLen
	}
	n += copy(buf[n:], j.src[off:off+plen]) // live: produce checked j.mr
	clear(buf[n : n+pad])
	n += pad
	j.next++
	if last {
		j.release()
		c.jobs.Pop()
	}
	c.c.ReadResponsesSent++
	return SealICRC(buf, n, c.txFlow)
}

// onRequest handles a SEND, WRITE or READ request packet.
func (c *Conn) onRequest(now verbs.Time, p *Packet) {
	psn := p.BTH.PSN
	d := psn.Diff(c.epsn)
	if d > 0 {
		c.c.OutOfSequence++
		if !c.nakSent {
			c.nakSent = true
			c.queueResp(respNakSeq, c.epsn, SynNAKSequence)
		}
		return
	}
	if d < 0 {
		c.c.Duplicates++
		if p.BTH.Opcode == OpReadRequest {
			c.duplicateRead(p)
			return
		}
		if p.BTH.AckReq || !c.dupAcked {
			c.dupAcked = true
			c.queueResp(respAck, c.epsn.Add(-1), SynACK)
		}
		return
	}
	if c.qp.pd == nil {
		// The application has not created the QP yet: not ready.
		c.rnr(psn)
		return
	}
	op := p.BTH.Opcode
	switch {
	case op.IsSend():
		c.onSend(p)
	case op.IsWrite():
		c.onWrite(p)
	default:
		c.onReadRequest(p)
	}
}

// accepted records an executed request of n PSNs.
func (c *Conn) accepted(p *Packet, n int, completed bool) {
	c.epsn = c.epsn.Add(n)
	c.nakSent, c.dupAcked = false, false
	if c.resp.kind == respNakSeq {
		c.resp = respSlot{} // the gap filled before the NAK left
	}
	if completed {
		c.msn = (c.msn + 1) & PSNMask
	}
	if p.BTH.AckReq {
		c.queueResp(respAck, c.epsn.Add(-1), SynACK)
	}
}

func (c *Conn) rnr(psn PSN) {
	c.nakSent = true // later packets of this episode are dropped silently
	c.queueResp(respRNR, psn, SynRNR|Syndrome(c.budget.minRNR))
}

// responderError NAKs a request and puts the QP in the error state. The
// receive being filled, if any, completes with recvStatus.
func (c *Conn) responderError(psn PSN, syn Syndrome, recvStatus verbs.Status) {
	if syn == SynNAKRemoteAccess {
		c.c.AccessErrors++
	} else {
		c.c.InvalidRequests++
	}
	if recvStatus != verbs.StatusSuccess && c.qp.rq.Len() > 0 {
		s := c.qp.rq.Pop()
		c.completeRecv(&s, recvStatus, 0, verbs.WCRecv, 0, false)
	}
	c.resp = respSlot{kind: respNakErr, psn: psn, syn: syn}
	c.toError(verbs.StatusFlushed, verbs.FailLocalError)
}

func (c *Conn) onSend(p *Packet) {
	info := opTable[p.BTH.Opcode]
	psn := p.BTH.PSN
	if (info.first && c.inMsg != msgNone) || (!info.first && c.inMsg != msgSend) {
		c.responderError(psn, SynNAKInvalidReq, verbs.StatusFlushed)
		return
	}
	if info.first {
		if c.qp.rq.Len() == 0 {
			c.rnr(psn)
			return
		}
		c.recvOff = 0
	}
	s := c.qp.rq.Front()
	pl := p.Payload
	if !info.last && len(pl) != c.mtu {
		c.responderError(psn, SynNAKInvalidReq, verbs.StatusFlushed)
		return
	}
	if uint64(c.recvOff)+uint64(len(pl)) > uint64(len(s.buf)) {
		c.responderError(psn, SynNAKInvalidReq, verbs.StatusLocalLengthError)
		return
	}
	if s.mr.Placeable() { // else deregistered: the receive fails (verbs.MemoryRegion.Deregister)
		copy(s.buf[c.recvOff:], pl)
	}
	c.recvOff += uint32(len(pl))
	c.c.PayloadPlaced += uint64(len(pl))
	if info.last {
		slot := c.qp.rq.Pop()
		c.completeRecv(&slot, verbs.StatusSuccess, c.recvOff, verbs.WCRecv, p.Imm, info.imm)
		c.inMsg = msgNone
	} else {
		c.inMsg = msgSend
	}
	c.accepted(p, 1, info.last)
}

func (c *Conn) onWrite(p *Packet) {
	info := opTable[p.BTH.Opcode]
	psn := p.BTH.PSN
	pl := p.Payload
	if info.first {
		if c.inMsg != msgNone {
			c.responderError(psn, SynNAKInvalidReq, verbs.StatusFlushed)
			return
		}
		r := &p.RETH
		var target []byte
		if r.DMALen > 0 {
			var ok bool
			if c.wrMR, target, ok = c.ep.regions.CheckRemote(c.qp.pd, verbs.RKey(r.RKey), r.VA, uint64(r.DMALen), verbs.AccessRemoteWrite); !ok {
				c.responderError(psn, SynNAKRemoteAccess, verbs.StatusSuccess)
				return
			}
		}
		if (info.last && uint32(len(pl)) != r.DMALen) || (!info.last && (len(pl) != c.mtu || r.DMALen <= uint32(c.mtu))) {
			c.responderError(psn, SynNAKInvalidReq, verbs.StatusSuccess)
			return
		}
		if info.imm && c.qp.rq.Len() == 0 {
			c.rnr(psn)
			return
		}
		c.wrBuf, c.wrOff = target, 0
		if r.DMALen == 0 {
			c.wrMR = nil
		}
	} else {
		if c.inMsg != msgWrite {
			c.responderError(psn, SynNAKInvalidReq, verbs.StatusFlushed)
			return
		}
		if !c.wrMR.Placeable() {
			// The target was deregistered mid-message: revoked, so the
			// rest is refused as any access under a dead key is.
			c.responderError(psn, SynNAKRemoteAccess, verbs.StatusSuccess)
			return
		}
		rest := len(c.wrBuf) - int(c.wrOff)
		if (info.last && len(pl) != rest) || (!info.last && (len(pl) != c.mtu || c.mtu >= rest)) {
			c.responderError(psn, SynNAKInvalidReq, verbs.StatusSuccess)
			return
		}
		if info.imm && c.qp.rq.Len() == 0 {
			c.rnr(psn)
			return
		}
	}
	copy(c.wrBuf[c.wrOff:], pl)
	c.wrOff += uint32(len(pl))
	c.c.PayloadPlaced += uint64(len(pl))
	if info.last {
		if info.imm {
			slot := c.qp.rq.Pop()
			c.completeRecv(&slot, verbs.StatusSuccess, uint32(len(c.wrBuf)), verbs.WCRecvWriteImm, p.Imm, true)
		}
		c.inMsg, c.wrBuf, c.wrMR = msgNone, nil, nil
	} else {
		c.inMsg = msgWrite
	}
	c.accepted(p, 1, info.last)
}

func (c *Conn) onReadRequest(p *Packet) {
	psn := p.BTH.PSN
	if c.inMsg != msgNone || c.jobs.Len() >= maxReadJobs {
		c.responderError(psn, SynNAKInvalidReq, verbs.StatusFlushed)
		return
	}
	m, src, ok := c.readSource(&p.RETH)
	if !ok {
		c.responderError(psn, SynNAKRemoteAccess, verbs.StatusSuccess)
		return
	}
	n := chunks(p.RETH.DMALen, c.mtu)
	c.jobs.Push(readJob{psn: psn, src: src, mr: m, npkts: n})
	c.accepted(p, n, true)
}

// readSource checks a READ's RETH and returns the bytes to send.
func (c *Conn) readSource(r *RETH) (*verbs.MemoryRegion, []byte, bool) {
	if r.DMALen == 0 {
		return nil, nil, true
	}
	return c.ep.regions.CheckRemote(c.qp.pd, verbs.RKey(r.RKey), r.VA, uint64(r.DMALen), verbs.AccessRemoteRead)
}

// duplicateRead executes a READ request again: the requester lost some of
// its responses (or re-requests the rest of a READ from a later PSN). Its
// responses replace whatever was queued from its PSN on; the requester
// re-sends every later request too, so later queued READs are dropped.
func (c *Conn) duplicateRead(p *Packet) {
	psn := p.BTH.PSN
	if c.qp.pd == nil {
		return
	}
	n := chunks(p.RETH.DMALen, c.mtu)
	if psn.Add(n).Diff(c.epsn) > 0 {
		c.c.Malformed++ // reaches beyond what was ever requested
		return
	}
	m, src, ok := c.readSource(&p.RETH)
	if !ok {
		// The key was good when the READ was first accepted: its region
		// has been deregistered since. The READ fails as a new one would.
		c.responderError(psn, SynNAKRemoteAccess, verbs.StatusSuccess)
		return
	}
	for c.jobs.Len() > 0 && psn.Less(c.jobs.At(c.jobs.Len()-1).psn) {
		j := c.jobs.PopBack()
		j.release()
	}
	if c.jobs.Len() > 0 {
		j := c.jobs.At(c.jobs.Len() - 1)
		if k := psn.Diff(j.psn); k < j.npkts {
			if j.next <= k {
				return // not sent that far yet: the queued job covers it
			}
			jj := c.jobs.PopBack()
			jj.release()
		}
	}
	c.c.DuplicateReads++
	c.jobs.Push(readJob{psn: psn, src: src, mr: m, npkts: n})
}
