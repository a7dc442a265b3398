package rocev2

import (
	"math"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

type connState uint8

const (
	stateConnecting  connState = iota // REQ sent, waiting for REP
	stateAccepting                    // REP sent, waiting for RTU (or the first request)
	stateEstablished                  // ready to send (RTS)
	stateError                        // QP in the error state: work flushed, nothing accepted
	stateClosed                       // removed from the endpoint
)

func (s connState) String() string {
	return [...]string{"connecting", "accepting", "established", "error", "closed"}[s]
}

// Conn is one RC queue pair connected to one peer QP: as on a NIC, several
// QPs between two hosts are separate Conns, each with its own UDP source
// port (one ECMP path), PSN spaces and DCQCN rate. All methods must be
// called on the endpoint's goroutine.
type Conn struct {
	ep       *Endpoint
	peer     verbs.PeerHandle
	qpn      uint32
	rqpn     uint32
	state    connState
	outbound bool
	direct   bool // connected out of band (OpenQP): no CM messages
	failure  verbs.Status
	reason   verbs.FailReason // why the QP failed (set with failure)
	mtu      int
	maxRd    int // READ requests this requester may have outstanding
	sport    uint16
	txFlow   Flow // local -> peer
	rxFlow   Flow // peer -> local

	// Connection management.
	tid          uint64
	rcommID      uint32 // the peer's communication id
	retryAt      verbs.Time
	tries        int
	cmOut        queue.Ring[uint16] // CM attributes to send
	psnStart     PSN                // our requester's starting PSN
	peerPSNStart PSN

	qp QueuePair

	// Requester.
	sq           queue.Ring[*wqe]
	wqePool      []*wqe
	nextPSN      PSN // first PSN of the next WQE to be assigned
	una          PSN // oldest unacknowledged PSN
	sndPSN       PSN // PSN of the next packet to transmit
	sndMax       PSN // one past the highest PSN transmitted
	sendIdx      int // index in sq of the WQE holding sndPSN
	assigned     int // WQEs at the front of sq that have PSNs
	readsOut     int // READ WQEs before sendIdx (requests sent, responses pending)
	sinceAckReq  int
	retriesLeft  int
	rnrLeft      int
	lastProgress verbs.Time
	blockedUntil verbs.Time // RNR wait
	lastNakPSN   PSN
	haveNak      bool
	readGap      bool // a go-back-N for a missing READ response is under way

	// Responder.
	epsn      PSN
	msn       uint32
	nakSent   bool // a NAK of the current gap episode was sent
	dupAcked  bool
	inMsg     uint8 // msgNone, msgSend, msgWrite
	recvOff   uint32
	wrBuf     []byte              // the target range of the WRITE in progress
	wrMR      *verbs.MemoryRegion // and its region
	wrOff     uint32
	resp      respSlot
	jobs      queue.Ring[readJob]
	preferJob bool // alternate READ responses and requests

	// DCQCN.
	rl         rateLimiter
	np         notifier
	nextSendAt float64 // DCQCN pacing of requests and READ responses, ns

	sched queue.Slot[*Conn] // deadline and ready-line place in Endpoint.sched

	c ConnCounters

	budget qpBudget // the QP's timeout and retry budgets (qptimers.go)
}

func newConn(e *Endpoint, now verbs.Time, peer verbs.PeerHandle, qpn uint32) *Conn {
	cfg := &e.cfg
	c := &Conn{ep: e, peer: peer, qpn: qpn, mtu: cfg.MTU,
		retriesLeft: cfg.RetryCount, rnrLeft: cfg.RNRRetry, maxRd: cfg.MaxRdAtomic}
	c.qp.conn = c
	c.budget.fromConfig(cfg)
	c.sched.Init(c)
	c.psnStart = PSN((qpn*0x9E3779B1 ^ cfg.PSNSeed*0x85EBCA6B) & PSNMask)
	c.nextPSN, c.una, c.sndPSN, c.sndMax = c.psnStart, c.psnStart, c.psnStart, c.psnStart
	c.rl = newRateLimiter(&cfg.DCQCN, cfg.LineRateBps)
	c.np.interval = cfg.DCQCN.CNPInterval
	c.txFlow = Flow{SrcIP: cfg.LocalIP, DstIP: cfg.PeerIP(peer)}
	c.rxFlow = Flow{SrcIP: c.txFlow.DstIP, DstIP: c.txFlow.SrcIP}
	c.lastProgress = now
	return c
}

// setPeer completes the QP's addressing once the peer's QPN is known.
func (c *Conn) setPeer(rqpn uint32, peerPSN PSN, mtu int) {
	c.rqpn = rqpn
	c.sport = SourcePort(c.qpn, rqpn)
	c.txFlow.SrcPort, c.rxFlow.SrcPort = c.sport, c.sport
	c.peerPSNStart, c.epsn = peerPSN, peerPSN
	c.mtu = mtu
}

// QPN is the local QP number.
func (c *Conn) QPN() uint32 { return c.qpn }

// RemoteQPN is the peer's QP number (0 until known).
func (c *Conn) RemoteQPN() uint32 { return c.rqpn }

// Peer is the backend's handle of the remote endpoint.
func (c *Conn) Peer() verbs.PeerHandle { return c.peer }

// SourcePort is the UDP source port (TxMeta.Entropy) of the QP's packets.
func (c *Conn) SourcePort() uint16 { return c.sport }

// Established reports whether the QP is connected and usable.
func (c *Conn) Established() bool { return c.state == stateEstablished }

// State names the QP's state: connecting, accepting, established, error or
// closed.
func (c *Conn) State() string { return c.state.String() }

// Failure is why the QP went to the error state (StatusSuccess if not).
func (c *Conn) Failure() verbs.Status { return c.failure }

// FailReason is why the QP failed: retry or RNR retry exceeded, refused
// (CM REJ), unanswered, or an error at either end (FailNone if it has not).
func (c *Conn) FailReason() verbs.FailReason { return c.reason }

// MTU is the negotiated path MTU.
func (c *Conn) MTU() int { return c.mtu }

// Counters returns the QP's counters (owner goroutine only).
func (c *Conn) Counters() *ConnCounters {
	c.c.RateCuts, c.c.RateIncrease = c.rl.cuts, c.rl.increases
	return &c.c
}

// Rate returns the QP's current DCQCN rate in bits per second (the line
// rate when it is not rate limited).
func (c *Conn) Rate(now verbs.Time) float64 { return c.rl.rate(now) }

// RateLimited reports whether DCQCN currently limits the QP.
func (c *Conn) RateLimited() bool { return c.rl.limited }

// QP returns the connection's queue pair (valid before CreateQP too, but
// unusable until then).
func (c *Conn) QP() *QueuePair { return &c.qp }

// CreateQP gives the connection its protection domain and completion
// queues and returns its queue pair (one per connection). It may be called
// once.
func (c *Conn) CreateQP(attr verbs.QPAttr) (*QueuePair, error) {
	if c.state >= stateError {
		return nil, ErrNotUsable
	}
	if !c.ep.regions.Owns(attr.PD) {
		return nil, verbs.ErrBadAccess
	}
	if c.qp.pd != nil {
		return nil, ErrQPExists
	}
	c.qp.pd, c.qp.sendCQ, c.qp.recvCQ = attr.PD, attr.SendCQ, attr.RecvCQ
	if attr.Timers != nil {
		c.budget.fromTimers(*attr.Timers)
		c.retriesLeft, c.rnrLeft = c.budget.retries, c.budget.rnrRetry
	}
	return &c.qp, nil
}

// Close flushes every outstanding work request, sends the peer a DREQ
// (once, without retries: a peer that misses it finds out by its own
// timeouts, as with a destroyed QP; none for a QP of OpenQP, which the CM
// never knew) and removes the QP.
func (c *Conn) Close(now verbs.Time) {
	if c.state >= stateClosed {
		return
	}
	if !c.direct && (c.state == stateEstablished || c.state == stateAccepting) {
		c.ep.reply(c.peer, CMMessage{Attr: AttrDREQ, TID: c.tid, LocalCommID: c.qpn, RemoteCommID: c.rcommID, QPN: c.rqpn})
	}
	c.flush(verbs.StatusFlushed)
	c.finish()
}

// toError moves the QP to the error state: the work request at the head
// of the send queue completes with head, every other one and every receive
// with StatusFlushed (as ibv does when a QP enters the error state).
func (c *Conn) toError(head verbs.Status, why verbs.FailReason) { c.toErrorAt(0, head, why) }

// toErrorAt is toError with the error at the i-th work request of the
// send queue (the ones before it are flushed too: none of them will be
// acknowledged now).
func (c *Conn) toErrorAt(i int, st verbs.Status, why verbs.FailReason) {
	if c.state >= stateError {
		return
	}
	c.failure, c.reason = st, why
	c.state = stateError
	c.flushAt(i, st)
}

// flush completes all outstanding work.
func (c *Conn) flush(head verbs.Status) { c.flushAt(0, head) }

// flushAt completes all outstanding work: the i-th send work request with
// st, every other one with StatusFlushed.
func (c *Conn) flushAt(i int, st verbs.Status) {
	for k := 0; c.sq.Len() > 0; k++ {
		w := c.sq.Pop()
		if k == i {
			c.completeSend(w, st)
		} else {
			c.completeSend(w, verbs.StatusFlushed)
		}
	}
	c.sendIdx, c.assigned, c.readsOut = 0, 0, 0
	for c.qp.rq.Len() > 0 {
		s := c.qp.rq.Pop()
		c.completeRecv(&s, verbs.StatusFlushed, 0, verbs.WCOpcode(verbs.WCRecv), 0, false)
	}
	for c.jobs.Len() > 0 {
		j := c.jobs.Pop()
		j.release()
	}
	c.inMsg, c.wrBuf, c.wrMR = msgNone, nil, nil
}

// finish removes the QP from the endpoint.
func (c *Conn) finish() {
	c.state = stateClosed
	c.cmOut.Clear()
	c.resp = respSlot{}
	c.ep.forget(c)
}

// fail ends a connection that never came up (or was torn down by the
// peer): every work request completes, the QP is removed.
func (c *Conn) fail(st verbs.Status, why verbs.FailReason) {
	if c.state >= stateClosed {
		return
	}
	if c.state < stateError {
		c.failure, c.reason = st, why
	}
	c.flush(st)
	c.finish()
}

// ackTimeout is the local ACK timeout.
func (c *Conn) ackTimeout() verbs.Time { return verbs.Time(AckTimeout(c.budget.ackCode)) }

// computeDeadline returns the earliest time the QP needs OnTimer; work that
// NextPacket can do at once is not a deadline but readiness.
func (c *Conn) computeDeadline(now verbs.Time) (d verbs.Time, ready bool) {
	d = verbs.Never
	at := func(t verbs.Time) {
		if t < d {
			d = t
		}
	}
	switch c.state {
	case stateConnecting, stateAccepting:
		at(c.retryAt)
		return d, c.cmOut.Len() > 0
	case stateEstablished:
	case stateError:
		return verbs.Never, c.respReady()
	default:
		return verbs.Never, false
	}
	ready = c.cmOut.Len() > 0 || c.np.pending || c.respReady()
	if c.hasData(now) {
		if t := c.nextSendAt; t > float64(now) {
			at(verbs.Time(math.Ceil(t)))
		} else {
			ready = true
		}
	} else if c.blockedUntil > now && c.requesterHasWork() {
		at(c.blockedUntil)
	}
	if c.una != c.sndMax && c.budget.ackCode != 0 { // timeout 0: infinite
		at(max(c.lastProgress, c.blockedUntil) + c.ackTimeout())
	}
	return d, ready
}

// onTimer runs the QP's timers.
func (c *Conn) onTimer(now verbs.Time) {
	cfg := &c.ep.cfg
	switch c.state {
	case stateConnecting, stateAccepting:
		if now < c.retryAt {
			return
		}
		c.tries++
		if c.tries > cfg.ConnectRetries {
			c.fail(verbs.StatusRetryExceeded, verbs.FailConnectTimeout)
			return
		}
		if c.state == stateConnecting {
			c.queueCM(AttrREQ)
		} else {
			c.queueCM(AttrREP)
		}
		c.retryAt = now.Add(verbs.RetryInterval(cfg.ConnectRetry, cfg.ConnectRetryMax, c.tries))
		return
	case stateEstablished:
	default:
		return
	}
	if c.una != c.sndMax && c.budget.ackCode != 0 && now >= max(c.lastProgress, c.blockedUntil)+c.ackTimeout() {
		c.c.Timeouts++
		c.retry(now, c.una)
	}
}

// produce writes the QP's next packet into buf, if it has one: connection
// management first, then CNPs, then the responder's ACK/NAK (unless READ
// responses must precede it), then READ responses and requests in turn,
// paced at the DCQCN rate.
func (c *Conn) produce(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if c.cmOut.Len() > 0 {
		attr := c.cmOut.Pop()
		m := c.cmMessage(attr)
		n := c.ep.putCM(buf, c.peer, &m)
		c.ep.c.CMSent++
		return c.meta(n, verbs.Entropy(GSIPort)), true
	}
	switch c.state {
	case stateEstablished:
	case stateError:
		if c.respReady() {
			return c.meta(c.buildResp(buf), verbs.Entropy(c.sport)), true
		}
		return verbs.TxMeta{}, false
	default:
		return verbs.TxMeta{}, false
	}
	if c.np.pending {
		c.np.pending = false
		c.c.CNPsSent++
		return c.meta(c.buildCNP(buf), verbs.Entropy(c.sport)), true
	}
	if c.respReady() {
		return c.meta(c.buildResp(buf), verbs.Entropy(c.sport)), true
	}
	if float64(now) < c.nextSendAt {
		return verbs.TxMeta{}, false
	}
	n := 0
	c.preferJob = !c.preferJob
	if c.jobs.Len() > 0 && (c.preferJob || !c.requesterReady(now)) {
		if j := c.jobs.Front(); j.mr.Revoked() {
			// The READ's source was deregistered while being served
			// (verbs.MemoryRegion.Deregister): nothing more is sent from
			// it; the rest is refused as a READ under the dead key is, at
			// the next response's PSN (the requester has taken the
			// earlier ones), and the QP goes to the error state.
			c.responderError(j.psn.Add(j.next), SynNAKRemoteAccess, verbs.StatusSuccess)
			return c.produce(now, buf)
		}
		n = c.buildReadResponse(buf)
	} else if c.requesterReady(now) {
		if w := *c.sq.At(c.sendIdx); w.op != verbs.WRRead && w.mr.Revoked() {
			// Its source was deregistered before all of it was sent
			// (verbs.MemoryRegion.Deregister): nothing more is sent from
			// it, and, as a local protection error does to an RC QP, the
			// work request fails and the QP goes to the error state (the
			// peer's receive, if one was started, never completes).
			c.toErrorAt(c.sendIdx, verbs.StatusLocalProtError, verbs.FailLocalError)
			return c.produce(now, buf)
		}
		n = c.buildRequest(now, buf)
	}
	if n == 0 {
		return verbs.TxMeta{}, false
	}
	wire := n + c.ep.cfg.FrameOverhead
	if !c.ep.cfg.DCQCN.Disable {
		c.rl.onSent(now, wire)
		if c.rl.limited {
			c.nextSendAt = max(c.nextSendAt, float64(now)) + txDuration(wire, c.rl.rate(now))
		}
	}
	return c.meta(n, verbs.Entropy(c.sport)), true
}

// hasData reports whether the QP has a request or READ response to send.
func (c *Conn) hasData(now verbs.Time) bool {
	return c.jobs.Len() > 0 || c.requesterReady(now)
}

func (c *Conn) meta(n int, entropy verbs.Entropy) verbs.TxMeta {
	c.c.TxPackets++
	c.c.TxBytes += uint64(n)
	return verbs.TxMeta{Len: n, Peer: c.peer, TxRoute: verbs.TxRoute{Entropy: entropy}}
}

// buildCNP writes a Congestion Notification Packet to the peer QP (IBA
// Annex A17.9.3): BTH with opcode 0x81 and BECN set, 16 reserved bytes.
func (c *Conn) buildCNP(buf []byte) int {
	h := BTH{Opcode: OpCNP, PKey: c.ep.cfg.PKey, BECN: true, DestQP: c.rqpn}
	h.Put(buf)
	clear(buf[BTHLen : BTHLen+CNPPayloadLen])
	return SealICRC(buf, BTHLen+CNPPayloadLen, c.txFlow)
}

// receive handles a packet for this QP whose ICRC checked out.
func (c *Conn) receive(now verbs.Time, p *Packet, rx verbs.RxMeta, n int) {
	if rx.Peer != c.peer {
		c.c.Malformed++
		return
	}
	c.c.RxPackets++
	c.c.RxBytes += uint64(n)
	if c.state == stateAccepting && p.BTH.Opcode.IsRequest() {
		// The RTU was lost or is late: the first request establishes the
		// QP, as the IBA's "communication established" event does.
		c.establish(now)
	}
	if c.state != stateEstablished {
		return
	}
	if p.BTH.PKey != c.ep.cfg.PKey {
		c.c.Malformed++
		return
	}
	if rx.CE && !c.ep.cfg.DCQCN.Disable && p.BTH.Opcode != OpCNP {
		c.c.CEReceived++
		c.np.onCE(now)
	}
	op := p.BTH.Opcode
	switch {
	case op == OpCNP:
		c.c.CNPsReceived++
		if !c.ep.cfg.DCQCN.Disable {
			c.rl.onCNP(now)
		}
	case op == OpAcknowledge:
		c.onAck(now, p)
	case op.IsReadResponse():
		c.onReadResponse(now, p)
	case op.IsRequest():
		c.onRequest(now, p)
	default:
		c.c.Malformed++
	}
}
