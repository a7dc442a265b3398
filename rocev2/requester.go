package rocev2

import (
	"github.com/metaroce/metaroce/verbs"
)

// The requester sends a QP's work requests as packets with consecutive
// PSNs and retires them as the responder acknowledges, go-back-N style,
// as RC NICs do:
//
//   - ACK(psn) acknowledges every PSN up to psn (coalesced: the responder
//     answers packets with AckReq, set on the last packet of each message
//     and every AckReqEvery packets).
//   - NAK PSN sequence error (psn) acknowledges every PSN before psn and
//     says psn was not received: transmission goes back to psn and resends
//     everything from there (go-back-N).
//   - RNR NAK (psn): as above, after the RNR timer the NAK carries.
//   - Error NAKs (remote access, invalid request, operational): the work
//     request fails and the QP goes to the error state.
//   - READ responses carry the READ's PSNs and arrive in order; one that
//     skips a PSN, or an ACK/NAK beyond a READ whose responses are
//     incomplete, means responses were lost: the READ is re-requested from
//     the first missing PSN (a new READ request for the rest).
//   - Local ACK timeout: nothing acknowledged for AckTimeout while packets
//     are outstanding: go back to the oldest unacknowledged PSN.
//
// Timeouts, sequence NAKs and missing READ responses consume the retry
// count (RetryCount); RNR NAKs consume RNRRetry. Both are restored when the
// acknowledged PSN advances. When one runs out, the head work request
// completes with StatusRetryExceeded or StatusRNRRetryExceeded and the QP
// goes to the error state, flushing the rest.

// maxOutstandingPSNs bounds the PSNs a requester has in flight, well below
// the 2^23 the 24-bit serial arithmetic allows.
const maxOutstandingPSNs = 1 << 22

// chunks is the number of packets a message of n bytes needs (at least one).
func chunks(n uint32, mtu int) int {
	if n == 0 {
		return 1
	}
	return int((uint64(n) + uint64(mtu) - 1) / uint64(mtu))
}

// requesterHasWork reports whether some work request has packets to send.
func (c *Conn) requesterHasWork() bool { return c.sendIdx < c.sq.Len() }

// requesterReady reports whether the requester may send a packet now.
func (c *Conn) requesterReady(now verbs.Time) bool {
	if c.sendIdx >= c.sq.Len() || now < c.blockedUntil {
		return false
	}
	w := *c.sq.At(c.sendIdx)
	if w.op == verbs.WRRead && c.readsOut >= c.maxRd {
		return false
	}
	if c.sendIdx == c.assigned && c.nextPSN.Diff(c.una)+chunks(w.length, c.mtu) >= maxOutstandingPSNs {
		return false
	}
	return true
}

// buildRequest writes the packet at sndPSN and advances. It returns the
// packet length.
func (c *Conn) buildRequest(now verbs.Time, buf []byte) int {
	if c.sendIdx == c.assigned {
		w := *c.sq.At(c.sendIdx)
		w.first = c.nextPSN
		w.npkts = chunks(w.length, c.mtu)
		c.nextPSN = c.nextPSN.Add(w.npkts)
		c.assigned++
	}
	w := *c.sq.At(c.sendIdx)
	k := c.sndPSN.Diff(w.first)
	if c.una == c.sndMax {
		c.lastProgress = now // the ACK timer starts with the first outstanding packet
	}
	retransmit := c.sndPSN.Less(c.sndMax)
	cfg := &c.ep.cfg
	h := BTH{PKey: cfg.PKey, DestQP: c.rqpn, PSN: c.sndPSN}
	n := BTHLen
	if w.op == verbs.WRRead {
		off := uint32(k) * uint32(c.mtu)
		h.Opcode = OpReadRequest
		h.Put(buf)
		r := RETH{VA: w.raddr + uint64(off), RKey: w.rkey, DMALen: w.length - off}
		r.Put(buf[n:])
		n += RETHLen
		w.reqStart = k
		c.sndPSN = w.first.Add(w.npkts)
		c.sendIdx++
		c.readsOut++
	} else {
		last := k == w.npkts-1
		off := k * c.mtu
		plen := min(c.mtu, int(w.length)-off)
		imm := w.op == verbs.WRWriteImm || w.op == verbs.WRSendImm
		write := w.op == verbs.WRWrite || w.op == verbs.WRWriteImm
		reth := false
		switch {
		case w.npkts == 1 && write:
			h.Opcode, reth = OpWriteOnly, true
			if imm {
				h.Opcode = OpWriteOnlyImm
			}
		case w.npkts == 1:
			h.Opcode = OpSendOnly
			if imm {
				h.Opcode = OpSendOnlyImm
			}
		case k == 0 && write:
			h.Opcode, reth = OpWriteFirst, true
		case k == 0:
			h.Opcode = OpSendFirst
		case last && write:
			h.Opcode = OpWriteLast
			if imm {
				h.Opcode = OpWriteLastImm
			}
		case last:
			h.Opcode = OpSendLast
			if imm {
				h.Opcode = OpSendLastImm
			}
		case write:
			h.Opcode = OpWriteMiddle
		default:
			h.Opcode = OpSendMiddle
		}
		h.AckReq = last || c.sinceAckReq+1 >= cfg.AckReqEvery
		if h.AckReq {
			c.sinceAckReq = 0
		} else {
			c.sinceAckReq++
		}
		pad := padFor(plen)
		h.PadCount = uint8(pad)
		h.Put(buf)
		if reth {
			r := RETH{VA: w.raddr, RKey: w.rkey, DMALen: w.length}
			r.Put(buf[n:])
			n += RETHLen
		}
		if imm && last {
			putUint32(buf[n:], w.imm)
			n += ImmLen
		}
		n += copy(buf[n:], w.local[off:off+plen]) // live: produce checked w.mr
		clear(buf[n : n+pad])
		n += pad
		c.sndPSN = c.sndPSN.Add(1)
		if last {
			c.sendIdx++
		}
	}
	if retransmit {
		c.c.DataResent++
	} else {
		c.c.DataPacketsSent++
	}
	if c.sndMax.Less(c.sndPSN) {
		c.sndMax = c.sndPSN
	}
	return SealICRC(buf, n, c.txFlow)
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// setSend moves transmission to PSN p (in [una, nextPSN]).
func (c *Conn) setSend(p PSN) {
	idx, reads := 0, 0
	for idx < c.assigned {
		w := *c.sq.At(idx)
		if p.Diff(w.first) < w.npkts {
			break
		}
		if w.op == verbs.WRRead {
			reads++
		}
		idx++
	}
	c.sendIdx, c.sndPSN, c.readsOut = idx, p, reads
}

// retry goes back to PSN p, consuming the retry count.
func (c *Conn) retry(now verbs.Time, p PSN) {
	if c.retriesLeft <= 0 {
		c.toError(verbs.StatusRetryExceeded, verbs.FailRetryExceeded)
		return
	}
	c.retriesLeft--
	c.c.Retries++
	c.setSend(p)
	c.lastProgress = now
}

// readGapRetry goes back to the READ at una whose responses went missing,
// once per episode.
func (c *Conn) readGapRetry(now verbs.Time) {
	if c.readGap {
		return
	}
	c.readGap = true
	c.retry(now, c.una)
}

// ackThrough acknowledges every PSN before to. It stops at a READ with
// responses missing (and starts its retry): READs complete only by their
// responses.
func (c *Conn) ackThrough(now verbs.Time, to PSN) {
	progressed := false
	for c.una.Less(to) && c.assigned > 0 {
		w := *c.sq.Front()
		if w.op == verbs.WRRead {
			c.readGapRetry(now)
			break
		}
		end := w.first.Add(w.npkts)
		if to.Less(end) {
			c.una = to
		} else {
			c.una = end
		}
		progressed = true
		c.completeHead()
	}
	if progressed {
		c.onProgress(now)
	}
}

// completeHead completes, in order, every work request at the head of the
// send queue whose PSNs are all acknowledged.
func (c *Conn) completeHead() {
	for c.assigned > 0 {
		w := *c.sq.Front()
		if c.una.Diff(w.first) < w.npkts {
			return
		}
		c.sq.Pop()
		c.assigned--
		if c.sendIdx > 0 {
			c.sendIdx--
		}
		if w.op == verbs.WRRead && c.readsOut > 0 {
			c.readsOut--
		}
		c.completeSend(w, verbs.StatusSuccess)
	}
}

// onProgress restarts the timer and the retry counts after una advanced.
func (c *Conn) onProgress(now verbs.Time) {
	c.lastProgress = now
	c.retriesLeft, c.rnrLeft = c.budget.retries, c.budget.rnrRetry
	c.readGap = false
	if c.haveNak && c.lastNakPSN.Less(c.una) {
		c.haveNak = false
	}
	if c.sndPSN.Less(c.una) {
		// An acknowledgement from before a go-back-N covers packets not
		// yet resent: no need to send them again.
		c.setSend(c.una)
	}
}

// onAck handles an Acknowledge packet (ACK, NAK or RNR NAK).
func (c *Conn) onAck(now verbs.Time, p *Packet) {
	psn, syn := p.BTH.PSN, p.AETH.Syndrome
	switch syn.Kind() {
	case KindACK:
		c.c.AcksReceived++
		// Valid: una-1 (a repeated ACK) .. sndMax-1.
		if psn.Diff(c.una) < -1 || !psn.Less(c.sndMax) {
			c.c.StaleAcks++
			return
		}
		c.ackThrough(now, psn.Add(1))
		return
	}
	if psn.Less(c.una) || !psn.Less(c.sndMax) {
		c.c.StaleAcks++
		return
	}
	c.ackThrough(now, psn)
	if c.state != stateEstablished {
		return
	}
	switch {
	case syn.Kind() == KindRNR:
		c.c.RNRNaksReceived++
		if c.una != psn {
			return
		}
		if c.budget.rnrRetry != verbs.RNRForever {
			if c.rnrLeft <= 0 {
				c.toError(verbs.StatusRNRRetryExceeded, verbs.FailRNRRetryExceeded)
				return
			}
			c.rnrLeft--
		}
		c.blockedUntil = now.Add(RNRTimer(syn.Value()))
		c.setSend(psn)
		c.lastProgress = now
	case syn == SynNAKSequence:
		c.c.NaksReceived++
		if c.una != psn {
			return
		}
		if c.haveNak && c.lastNakPSN == psn {
			c.c.DuplicateNaks++
			return
		}
		c.haveNak, c.lastNakPSN = true, psn
		c.retry(now, psn)
	default:
		c.c.ErrorNaksReceived++
		st := verbs.StatusRemoteOpError
		switch syn {
		case SynNAKInvalidReq:
			st = verbs.StatusRemoteInvalidReq
		case SynNAKRemoteAccess:
			st = verbs.StatusRemoteAccessError
		}
		c.toError(st, verbs.FailRemoteError)
	}
}

// onReadResponse places a READ response packet, in PSN order.
func (c *Conn) onReadResponse(now verbs.Time, p *Packet) {
	psn := p.BTH.PSN
	if psn.Less(c.una) {
		c.c.DuplicateResponses++
		return
	}
	if !psn.Less(c.sndMax) {
		c.c.Malformed++
		return
	}
	op := p.BTH.Opcode
	if opTable[op].aeth && p.AETH.Syndrome.Kind() != KindACK {
		c.c.Malformed++
		return
	}
	c.ackThrough(now, psn)
	if c.state != stateEstablished {
		return
	}
	if c.una != psn {
		c.readGapRetry(now)
		return
	}
	w := *c.sq.Front()
	if w.op != verbs.WRRead {
		c.c.Malformed++
		return
	}
	k := psn.Diff(w.first)
	last := k == w.npkts-1
	want := c.mtu
	if last {
		want = int(w.length) - k*c.mtu
	}
	okOp := (last && (op == OpReadResponseLast || op == OpReadResponseOnly)) ||
		(!last && (op == OpReadResponseFirst || op == OpReadResponseMid))
	if !okOp || len(p.Payload) != want {
		c.c.Malformed++
		return
	}
	if w.mr.Placeable() { // else deregistered: the READ fails (verbs.MemoryRegion.Deregister)
		copy(w.local[k*c.mtu:], p.Payload)
		c.c.PayloadPlaced += uint64(want)
	}
	c.c.ReadResponses++
	c.una = psn.Add(1)
	c.completeHead()
	c.onProgress(now)
}
