package rocev2

import "github.com/metaroce/metaroce/verbs"

// CM state machine of a QP (see cm.go for the messages):
//
//	active:  Connect -> connecting --REP--> established (RTU sent)
//	passive: REQ -> accepting --RTU or first request--> established
//
// The active side repeats its REQ, after ConnectRetry and then doubling
// waits up to ConnectRetryMax (verbs.RetryInterval), until a REP arrives,
// the passive side its REP until the RTU (or a request) arrives; a repeated
// REQ is answered with the same REP, a repeated REP with another RTU. After
// ConnectRetries attempts the QP fails.

// maxCMQueue bounds CM messages queued on one QP.
const maxCMQueue = 8

func (c *Conn) queueCM(attr uint16) {
	if c.cmOut.Len() < maxCMQueue {
		c.cmOut.Push(attr)
	}
}

// cmMessage builds the QP's CM message of the given kind.
func (c *Conn) cmMessage(attr uint16) CMMessage {
	cfg := &c.ep.cfg
	m := CMMessage{Attr: attr, TID: c.tid, LocalCommID: c.qpn, RemoteCommID: c.rcommID}
	switch attr {
	case AttrREQ:
		m.RemoteCommID = 0
		m.QPN, m.StartPSN, m.MTU = c.qpn, c.psnStart, cfg.MTU
		m.RetryCount = uint8(min(cfg.RetryCount, 7))
		m.RNRRetryCount = uint8(cfg.RNRRetry)
		m.ResponderResources, m.InitiatorDepth = uint8(cfg.MaxRdAtomic), uint8(cfg.MaxRdAtomic)
		m.AckTimeout, m.PKey = cfg.AckTimeoutCode, cfg.PKey
		m.SrcIP, m.DstIP = c.txFlow.SrcIP, c.txFlow.DstIP
	case AttrREP:
		m.QPN, m.StartPSN, m.MTU = c.qpn, c.psnStart, c.mtu
		m.ResponderResources, m.InitiatorDepth = uint8(cfg.MaxRdAtomic), uint8(c.maxRd)
		m.RNRRetryCount = uint8(cfg.RNRRetry)
	}
	return m
}

// establish makes the QP ready to send.
func (c *Conn) establish(now verbs.Time) {
	c.state = stateEstablished
	c.lastProgress = now
	c.tries = 0
}

// putCM writes a CM MAD as a UD SEND Only from QP1 to QP1.
func (e *Endpoint) putCM(buf []byte, peer verbs.PeerHandle, m *CMMessage) int {
	h := BTH{Opcode: OpUDSendOnly, PKey: e.cfg.PKey, DestQP: GSIQP, PSN: e.cmPSN}
	e.cmPSN = e.cmPSN.Add(1)
	h.Put(buf)
	d := DETH{QKey: GSIQKey, SrcQP: GSIQP}
	d.Put(buf[BTHLen:])
	m.Put(buf[BTHLen+DETHLen:])
	f := Flow{SrcIP: e.cfg.LocalIP, DstIP: e.cfg.PeerIP(peer), SrcPort: GSIPort}
	return SealICRC(buf, BTHLen+DETHLen+MADLen, f)
}

// receiveCM handles a packet for QP1.
func (e *Endpoint) receiveCM(now verbs.Time, pkt []byte, p *Packet, rx verbs.RxMeta) {
	f := Flow{SrcIP: e.cfg.PeerIP(rx.Peer), DstIP: e.cfg.LocalIP, SrcPort: GSIPort}
	if !CheckICRC(pkt, f) {
		e.c.ICRCDrops++
		return
	}
	var m CMMessage
	if p.BTH.Opcode != OpUDSendOnly || p.DETH.QKey != GSIQKey || len(p.Payload) != MADLen || m.Decode(p.Payload) != nil {
		e.c.Malformed++
		return
	}
	e.c.CMReceived++
	switch m.Attr {
	case AttrREQ:
		e.onREQ(now, &m, rx.Peer)
		return
	case AttrDREP:
		return
	}
	c := e.qps[m.RemoteCommID]
	// A QP of OpenQP has no CM state: a message naming it is a DREQ for
	// something unknown, or nothing.
	if c == nil || c.peer != rx.Peer || c.direct {
		if m.Attr == AttrDREQ {
			e.reply(rx.Peer, CMMessage{Attr: AttrDREP, TID: m.TID, LocalCommID: m.RemoteCommID, RemoteCommID: m.LocalCommID})
		}
		return
	}
	switch m.Attr {
	case AttrREP:
		if !c.outbound || m.MTU > e.cfg.MTU {
			return
		}
		switch {
		case c.state == stateConnecting:
			c.rcommID = m.LocalCommID
			c.setPeer(m.QPN, m.StartPSN, m.MTU)
			c.maxRd = max(1, min(e.cfg.MaxRdAtomic, int(m.ResponderResources)))
			c.establish(now)
			c.queueCM(AttrRTU)
		case c.state == stateEstablished && m.LocalCommID == c.rcommID:
			c.queueCM(AttrRTU) // our RTU was lost
		}
	case AttrRTU:
		if !c.outbound && c.state == stateAccepting && m.LocalCommID == c.rcommID {
			c.establish(now)
		}
	case AttrREJ:
		if c.outbound && c.state == stateConnecting {
			c.fail(verbs.StatusRetryExceeded, verbs.FailRefused)
			return
		}
	case AttrDREQ:
		if m.LocalCommID == c.rcommID {
			c.flush(verbs.StatusFlushed)
			c.finish()
			e.reply(rx.Peer, CMMessage{Attr: AttrDREP, TID: m.TID, LocalCommID: c.qpn, RemoteCommID: m.LocalCommID})
			return
		}
	}
	e.touch(c, now)
}

// onREQ accepts (or refuses) a connection request.
func (e *Endpoint) onREQ(now verbs.Time, m *CMMessage, peer verbs.PeerHandle) {
	if c := e.reqs[reqKey{peer, m.LocalCommID, m.TID}]; c != nil {
		if c.state == stateAccepting {
			c.queueCM(AttrREP) // our REP was lost
			e.touch(c, now)
		}
		return
	}
	if !e.cfg.AcceptIncoming {
		e.c.RefusedNotAccepting++
		e.reply(peer, CMMessage{Attr: AttrREJ, TID: m.TID, RemoteCommID: m.LocalCommID, RejectReason: RejectConsumerReject})
		return
	}
	c, err := e.newConn(now, peer)
	if err != nil {
		e.c.RefusedMaxQPs++
		e.reply(peer, CMMessage{Attr: AttrREJ, TID: m.TID, RemoteCommID: m.LocalCommID, RejectReason: RejectNoQP})
		return
	}
	c.tid, c.rcommID = m.TID, m.LocalCommID
	c.setPeer(m.QPN, m.StartPSN, min(e.cfg.MTU, m.MTU))
	c.maxRd = max(1, min(e.cfg.MaxRdAtomic, int(m.ResponderResources)))
	c.state = stateAccepting
	c.queueCM(AttrREP)
	c.tries = 1
	c.retryAt = now.Add(verbs.RetryInterval(e.cfg.ConnectRetry, e.cfg.ConnectRetryMax, c.tries))
	e.reqs[reqKey{peer, c.rcommID, c.tid}] = c
	e.queueAccepted(c)
	e.touch(c, now)
}
