package metaroce

import (
	"sort"
	"time"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

type connState uint8

const (
	connConnecting connState = iota
	connEstablished
	connClosing // local Close: CLOSE sent, waiting for CLOSE_ACK
	connClosed
	connFailed
)

func (s connState) String() string {
	return [...]string{"connecting", "established", "closing", "closed", "failed"}[s]
}

// ctrlPkt is an unsequenced packet waiting to be sent.
type ctrlPkt struct {
	op  Opcode
	nak NakBody
}

// resendRef names a slot queued for resend.
type resendRef struct {
	path verbs.PathID
	gen  uint16
	psn  PSN
}

// movedPkt is a packet taken off a failed path, to be sent again on another.
type movedPkt struct {
	kind    slotKind
	msg     *txMsg
	job     *readJob
	attempt uint16
	offset  uint32
	length  uint32
}

// maxCtrlQueue bounds queued control packets (NAKs above all): beyond it
// new NAKs are not queued, the sender resends and gets its NAK then.
const maxCtrlQueue = 1024

// maxReadJobs bounds READ responses a connection queues for its peer (the
// responder resources of a verbs QP); more READ requests are answered
// receiver-not-ready and retried by the requester.
const maxReadJobs = 1024

// Conn is a connection to one peer: many ordered streams above, many paths
// below. All methods must be called on the endpoint's goroutine.
type Conn struct {
	ep       *Endpoint
	local    ConnID // our id, random (Endpoint.newConn)
	remote   ConnID
	ordinal  ConnID // 1 for the endpoint's first connection, 2 for the next...
	peer     verbs.PeerHandle
	peerNode NodeID
	peerInc  Incarnation
	// tokLocal is our secret of the connection, tokRemote the peer's
	// (token.go): packets we receive prove the first, packets we send the
	// second.
	tokLocal, tokRemote Token
	state               connState
	outbound            bool
	failure             verbs.Status     // the status its work requests failed with
	reason              verbs.FailReason // why the connection failed (set once, by fail)

	paths, mtu, streams, planes int

	tx []txPath
	rx []rxPath

	qps     []*QueuePair           // by stream id (nil: not created); grows to the highest id created
	qpOrder []*QueuePair           // the same queue pairs, by stream id
	active  queue.Ring[*QueuePair] // streams that may have data to send
	jobs    queue.Ring[*readJob]   // READ responses with packets still to build
	jobRR   bool                   // alternate between READ responses and streams

	resend  queue.Ring[resendRef]
	moved   queue.Ring[movedPkt]
	ackList queue.Ring[verbs.PathID]
	ctrl    queue.Ring[ctrlPkt]

	msgPool []*txMsg
	jobPool []*readJob
	// deferredJobs: READs accepted but waiting in a stream's window for
	// earlier messages (rxWindow); they count against maxReadJobs.
	deferredJobs int
	winWords     int          // chunk-set storage held by the streams' windows (maxWindowWords)
	heldPool     []*heldChunk // WRITE last chunks held back (placeWrite), pooled
	heldN        int          // of them in use
	errHist      [errorHistoryLen]errorRecord
	errNext      int

	picker     PathPicker
	rtt        rttEstimator  // over every path's samples: the fallback for paths without their own
	fastest    time.Duration // the fastest healthy path's srtt, as of the ACK being processed
	limit      connLimit     // pacing at the peer's rate hint, in-flight cap (pacer.go)
	share      rxShare       // this connection as a sender to us (ratehint.go)
	rerolls    uint16        // entropies taken so far by re-rolls (health.go)
	ctrlRR     int           // rotation of control packets over paths
	acceptPath verbs.PathID  // path the CONNECT came by (ACCEPT answers on it)

	lastRx        verbs.Time
	lastKeepalive verbs.Time
	askedAt       verbs.Time // a timeout last asked the peer for a word (health.go peerAnswered)
	retryAt       verbs.Time // next CONNECT or CLOSE attempt
	qpCheckAt     verbs.Time // lower bound of the QPs' no-ACK deadlines; 0: none running (qptimers.go)
	connectSentAt verbs.Time // the last CONNECT or ACCEPT sent: the answer gives a first RTT sample
	tries         int

	sched queue.Slot[*Conn] // deadline and ready-line place in Endpoint.sched
	agg   connAgg           // what computeDeadline needs of every path, ACK and stream (aggregates.go)
	// Its places in the endpoint's admission lists and peer index
	// (admission.go, peers.go).
	halfOpen, acceptQ connLink
	inboundIndexed    bool
	groupPos          int        // 1 + index in its peerGroup; 0: not in one
	amp               ampBudget  // while half-open (amplification.go)
	restartChecked    bool       // an inbound connection's restart detection ran (provenByTag)
	proveAt           verbs.Time // an initiator's proof ACK is due (0: none; amplification.go)

	sec *connSec // the sealed modes' hello and keys (seal.go); nil in mode none

	c ConnCounters
}

// LocalID is this side's connection id.
func (c *Conn) LocalID() ConnID { return c.local }

// RemoteID is the peer's connection id (0 until established).
func (c *Conn) RemoteID() ConnID { return c.remote }

// Peer is the backend's handle of the remote endpoint.
func (c *Conn) Peer() verbs.PeerHandle { return c.peer }

// PeerNode is the remote endpoint's node id (0 until established).
func (c *Conn) PeerNode() NodeID { return c.peerNode }

// Established reports whether the connection is up.
func (c *Conn) Established() bool { return c.state == connEstablished }

// State names the connection's state.
func (c *Conn) State() string { return c.state.String() }

// Failure is the status the connection's work requests failed with
// (StatusSuccess while it has not failed).
func (c *Conn) Failure() verbs.Status { return c.failure }

// FailReason is why the connection failed: peer dead, reset, peer restart,
// refused or unanswered (FailNone while it has not failed).
func (c *Conn) FailReason() verbs.FailReason { return c.reason }

// NumPaths is the number of paths with state (0 until established, and on
// an accepted connection until its peer's first packet or the first work
// posted on it: admission.go); the path accessors below take 0..NumPaths-1.
func (c *Conn) NumPaths() int { return len(c.tx) }

// MTU is the negotiated payload size per packet.
func (c *Conn) MTU() int { return c.mtu }

// Counters returns the connection's counters (owner goroutine only).
func (c *Conn) Counters() *ConnCounters { return &c.c }

// PathCounters returns path i's counters (owner goroutine only).
func (c *Conn) PathCounters(i verbs.PathID) *PathCounters { return &c.tx[i].c }

// PathSRTT returns path i's smoothed RTT (0 before the first sample).
func (c *Conn) PathSRTT(i verbs.PathID) time.Duration { return c.tx[i].srtt }

// PathWindow returns path i's congestion window in packets.
func (c *Conn) PathWindow(i verbs.PathID) int { return c.tx[i].cc.window() }

// PathMarkedFraction returns path i's smoothed fraction of CE-marked
// packets (0..1).
func (c *Conn) PathMarkedFraction(i verbs.PathID) float64 { return c.tx[i].cc.alpha }

// PathEntropy returns path i's current entropy (UDP source port).
func (c *Conn) PathEntropy(i verbs.PathID) verbs.Entropy { return c.tx[i].entropy }

// RateHintBps is the rate the peer last asked this side to send at, in
// bits/s (0 = no hint: not paced).
func (c *Conn) RateHintBps() float64 { return c.limit.hintBps }

// Inflight is the number of sequenced packets not yet acknowledged on the
// paths not judged failed (a failed path's probes do not count).
func (c *Conn) Inflight() int { return c.limit.inflight }

// PathFailed reports whether path i is currently judged failed.
func (c *Conn) PathFailed(i verbs.PathID) bool { return c.tx[i].failed }

// CreateQP opens stream id on this connection. The peer must open the same
// stream id for SENDs to find receives and for WRITEs and READs to be
// checked against a protection domain; until it does, they are answered
// receiver-not-ready and retried.
func (c *Conn) CreateQP(id StreamID, attr verbs.QPAttr) (*QueuePair, error) {
	if c.state >= connClosing {
		return nil, ErrNotUsable
	}
	if !c.ep.regions.Owns(attr.PD) {
		return nil, verbs.ErrBadAccess
	}
	if limit := c.ep.cfg.Streams; int(id) >= limit || (c.streams > 0 && int(id) >= c.streams) {
		// Beyond our own limit, or beyond what the peer agreed to.
		return nil, ErrField
	}
	if c.QP(id) != nil {
		return nil, ErrStreamInUse
	}
	c.ep.nextQPN++
	q := &QueuePair{conn: c, id: id, qpn: c.ep.nextQPN, pd: attr.PD, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ}
	if t := attr.Timers; t != nil {
		q.timers = qpTimers{set: true, noAck: t.NoAckLimit(), rnrTries: t.RNRRetries(), rnrWait: verbs.RNRTimer(t.MinRNRTimer)}
	}
	if int(id) >= len(c.qps) {
		c.qps = append(c.qps, make([]*QueuePair, int(id)+1-len(c.qps))...)
	}
	c.qps[id] = q
	// Keep qpOrder sorted by stream id: whatever walks every stream (flushes,
	// activation) does so in the same order on every run.
	i := sort.Search(len(c.qpOrder), func(i int) bool { return c.qpOrder[i].id > id })
	c.qpOrder = append(c.qpOrder, nil)
	copy(c.qpOrder[i+1:], c.qpOrder[i:])
	c.qpOrder[i] = q
	return q, nil
}

// QP returns the queue pair of stream id, or nil.
func (c *Conn) QP(id StreamID) *QueuePair {
	if int(id) >= len(c.qps) {
		return nil
	}
	return c.qps[id]
}

// Close flushes every outstanding work request and closes the connection
// in-band. The connection is removed once the peer acknowledges, or after
// ConnectRetries attempts.
func (c *Conn) Close(now verbs.Time) {
	if c.state >= connClosing {
		return
	}
	wasUp := c.state == connEstablished
	c.abort(verbs.StatusFlushed, verbs.StatusFlushed)
	if !wasUp {
		c.finish(connClosed)
		return
	}
	c.state = connClosing
	c.tries = 0
	c.retryAt = now
	c.ep.touch(c, now)
}

// establish sets up paths with the negotiated parameters.
func (c *Conn) establish(now verbs.Time, b *ConnectBody) {
	cfg := &c.ep.cfg
	c.paths = min(int(b.Paths), cfg.Paths)
	c.mtu = min(int(b.MTU), cfg.MTU)
	c.streams = min(int(b.Streams), cfg.Streams)
	c.planes = min(int(b.Planes), cfg.Planes)
	c.limit = connLimit{pktBytes: FullWriteLen(c.mtu),
		jitter: uint64(c.ordinal)*0x9e3779b97f4a7c15 ^ uint64(c.ep.cfg.Node)<<32}
	c.state = connEstablished
	c.lastRx = now
	c.lastKeepalive = now
	if c.outbound {
		// Our CONNECT was answered: the peer is there. An inbound
		// connection waits for its proof (Conn.prove) or for local work.
		c.materialize()
	}
	for _, q := range c.qpOrder {
		for i := 0; i < q.sq.Len(); i++ {
			c.sizeMsg(*q.sq.At(i)) // posted while connecting
		}
		if q.sq.Len() > 0 {
			c.activate(q)
			c.startNoAck(now, q)
		}
	}
}

// pathEntropy is path i's first entropy: each connection takes its own run
// of source ports, so connections between the same two hosts spread over
// different ECMP routes too.
func (c *Conn) pathEntropy(i int) verbs.Entropy {
	base := c.ep.cfg.EntropyBase
	span := 65536 - int(base)
	return base + verbs.Entropy((int(c.ordinal-1)*c.paths+i)%span)
}

// materialize allocates the per-path state of an established connection
// (once): the send and receive sides of every path, their aggregates and
// the picker. An accepted connection gets it only when its peer proves it
// is there or local work needs it, so an unanswered CONNECT costs no path
// state (admission.go).
func (c *Conn) materialize() {
	if c.tx != nil || c.state != connEstablished {
		return
	}
	cfg := &c.ep.cfg
	c.tx = make([]txPath, c.paths)
	c.rx = make([]rxPath, c.paths)
	for i := range c.tx {
		c.tx[i] = newTxPath(verbs.PathID(i), c.pathEntropy(i), verbs.PlaneID(i%c.planes), cfg.PathWindow, isnKey(&c.tokLocal, &c.tokRemote, i))
		c.rx[i] = rxPath{ackDue: verbs.Never, c: &c.tx[i].c, isn: isnKey(&c.tokRemote, &c.tokLocal, i)}
		c.rx[i].restart(0)
	}
	c.agg.resetPaths(c.paths)
	c.picker.reset(c.tx, c.planes)
	c.allPathsChanged() // every path starts with room: the picker weighs them
}

// sizeMsg counts a message's packets at the connection's MTU.
func (c *Conn) sizeMsg(m *txMsg) {
	if m.op == OpReadReq {
		m.nChunks = 1
		m.placed.reset(chunksFor(m.length, c.mtu))
	} else {
		m.nChunks = chunksFor(m.length, c.mtu)
	}
}

// abort completes every outstanding work request: messages already on the
// wire with inFlight, the others (and every receive) with Flushed, and
// releases everything the connection holds.
func (c *Conn) abort(inFlight, notStarted verbs.Status) {
	for _, q := range c.qpOrder {
		for i := 0; i < q.sq.Len(); i++ {
			m := *q.sq.At(i)
			m.outstanding = 0
			if m.finished {
				continue
			}
			m.finished = true
			if m.segOff > 0 || m.segDone || m.attempt > 0 {
				m.status = inFlight
			} else {
				m.status = notStarted
			}
		}
		q.completeSends()
		for i := 0; i < q.rq.Len(); i++ {
			s := q.rq.At(i)
			if !s.done {
				s.done, s.status = true, verbs.StatusFlushed
			}
		}
		q.completeRecvs()
		c.clearWindow(q)
		q.active = false
		c.streamChanged(q)
	}
	for c.jobs.Len() > 0 {
		c.releaseJobRefs(c.jobs.Pop())
	}
	for i := range c.tx {
		p := &c.tx[i]
		for psn := p.una; psn.Less(p.next); psn++ {
			if s := p.slot(psn); s.kind == slotReadResp && s.job != nil {
				s.job.outstanding--
				c.maybeReleaseJob(s.job)
			}
		}
		clear(p.slots)
		p.inUse = 0
	}
	c.allPathsChanged()
	c.limit.inflight = 0
	c.active.Clear()
	c.resend.Clear()
	c.moved.Clear()
	c.ackList.Clear()
}

// fail tears the connection down after the peer died, restarted or reset
// it (or never answered), keeping why.
func (c *Conn) fail(status verbs.Status, why verbs.FailReason) {
	if c.state >= connClosed {
		return
	}
	c.failure, c.reason = status, why
	c.abort(status, verbs.StatusFlushed)
	c.finish(connFailed)
}

// finish removes the connection from the endpoint.
func (c *Conn) finish(s connState) {
	c.state = s
	c.ep.share.remove(&c.ep.cfg, c)
	c.ctrl.Clear()
	c.ep.forget(c)
}

// activate puts q in the round robin of streams with data to send.
func (c *Conn) activate(q *QueuePair) {
	if !q.active && c.state == connEstablished {
		c.materialize()
		q.active = true
		c.active.Push(q)
		c.streamChanged(q)
	}
}

func (c *Conn) newMsg() *txMsg {
	if n := len(c.msgPool); n > 0 {
		m := c.msgPool[n-1]
		c.msgPool = c.msgPool[:n-1]
		return m
	}
	return &txMsg{}
}

// releaseMsg returns m to the pool once it is completed and no slot refers
// to it any more.
func (c *Conn) releaseMsg(m *txMsg) {
	if !m.completed || m.outstanding > 0 {
		return
	}
	m.mr = nil
	m.local, m.qp = nil, nil
	m.completed = false
	c.msgPool = append(c.msgPool, m)
}

func (c *Conn) newJob() *readJob {
	if n := len(c.jobPool); n > 0 {
		j := c.jobPool[n-1]
		c.jobPool = c.jobPool[:n-1]
		return j
	}
	return &readJob{}
}

func (c *Conn) releaseJobRefs(j *readJob) {
	j.mr = nil
}

// maybeReleaseJob frees a READ response once every packet is built and
// acknowledged (or the connection is gone).
func (c *Conn) maybeReleaseJob(j *readJob) {
	if j.outstanding > 0 || (!j.segDone && c.state == connEstablished) {
		return
	}
	c.releaseJobRefs(j)
	*j = readJob{}
	c.jobPool = append(c.jobPool, j)
}

// rememberError records how a receive-consuming message failed.
func (c *Conn) rememberError(stream StreamID, recvSeq MsgSeq, st verbs.Status) {
	c.errHist[c.errNext] = errorRecord{stream: stream, recvSeq: recvSeq, status: st, valid: true}
	c.errNext = (c.errNext + 1) % errorHistoryLen
}

func (c *Conn) lookupError(stream StreamID, recvSeq MsgSeq) (verbs.Status, bool) {
	for i := range c.errHist {
		e := &c.errHist[i]
		if e.valid && e.stream == stream && e.recvSeq == recvSeq {
			return e.status, true
		}
	}
	return 0, false
}

// queueCtrl queues an unsequenced packet.
func (c *Conn) queueCtrl(p ctrlPkt) {
	if c.ctrl.Len() < maxCtrlQueue {
		c.ctrl.Push(p)
	}
}

// queueAck schedules an ACK for path i.
func (c *Conn) queueAck(now verbs.Time, i verbs.PathID, immediate bool) {
	r := &c.rx[i]
	if immediate || r.unacked >= c.ep.cfg.AckEvery {
		r.ackNow = true
	} else if r.ackDue == verbs.Never {
		r.ackDue = now.Add(c.ep.share.ackHold(&c.ep.cfg, c, now))
	}
	if !r.queued {
		r.queued = true
		c.ackList.Push(i)
	}
	c.ackChanged(i)
}

// computeDeadline returns the earliest time the connection needs OnTimer.
// Work that NextPacket can do at once (a due ACK, a stream whose back-off
// ended) is not a deadline: the connection is marked ready instead.
func (c *Conn) computeDeadline(now verbs.Time) (d verbs.Time, ready bool) {
	d = verbs.Never
	at := func(t verbs.Time) {
		if t < d {
			d = t
		}
	}
	cfg := &c.ep.cfg
	switch c.state {
	case connConnecting, connClosing:
		at(c.retryAt)
		return d, c.ctrl.Len() > 0
	case connEstablished:
	default:
		return verbs.Never, false
	}
	ready = c.ctrl.Len() > 0
	if c.resend.Len() > 0 || c.moved.Len() > 0 {
		if c.limit.paced(now) {
			at(c.limit.nextSend)
		} else {
			ready = true
		}
	}
	// Pending ACKs, paths and active streams through their aggregates
	// (aggregates.go), not by walking them.
	at(c.acksDueBy(now))
	if c.agg.acksReady > 0 {
		ready = true
	}
	at(c.pathDeadline())
	at(c.streamsBlockedBy(now))
	newData := c.jobs.Len() > 0 || c.agg.streamsFree > 0
	if newData {
		// New packets wait for pacing (a time) or for the in-flight cap to
		// open (an ACK, which touches the connection).
		if t := c.limit.blockedUntil(cfg, now, c.resend.Len()); t <= now {
			ready = true
		} else {
			at(t)
		}
	}
	ka := c.lastRx
	if c.lastKeepalive > ka {
		ka = c.lastKeepalive
	}
	at(ka.Add(cfg.KeepaliveInterval))
	at(c.lastRx.Add(cfg.PeerDeadTimeout))
	if c.qpCheckAt != 0 {
		at(c.qpCheckAt) // a QP's no-ACK limit (qptimers.go)
	}
	if c.proveAt != 0 {
		at(c.proveAt) // an initiator's proof (amplification.go)
	}
	if ready && c.halfOpen.in && !c.amp.allows(c.ampBound()) {
		ready = false // until the peer sends more or proves itself (amplification.go)
	}
	if checkDeadline != nil {
		checkDeadline(c, now, d, ready)
	}
	return d, ready
}

// onTimer runs the connection's timers.
func (c *Conn) onTimer(now verbs.Time) {
	cfg := &c.ep.cfg
	switch c.state {
	case connConnecting, connClosing:
		if now < c.retryAt {
			return
		}
		c.tries++
		if c.tries > cfg.ConnectRetries {
			if c.state == connClosing {
				c.finish(connClosed)
			} else {
				c.fail(verbs.StatusRetryExceeded, verbs.FailConnectTimeout)
			}
			return
		}
		if c.state == connConnecting {
			c.queueCtrl(ctrlPkt{op: OpConnect})
			c.retryAt = now.Add(verbs.RetryInterval(cfg.ConnectRetry, cfg.ConnectRetryMax, c.tries))
		} else {
			c.queueCtrl(ctrlPkt{op: OpClose})
			c.retryAt = now.Add(cfg.ConnectRetry)
		}
		return
	case connEstablished:
	default:
		return
	}
	if now.Sub(c.lastRx) >= cfg.PeerDeadTimeout {
		c.fail(verbs.StatusRetryExceeded, verbs.FailPeerDead)
		return
	}
	if c.qpCheckAt != 0 && now >= c.qpCheckAt {
		c.checkNoAck(now)
	}
	c.proveIfSilent(now)
	if now.Sub(c.lastRx) >= cfg.KeepaliveInterval && now.Sub(c.lastKeepalive) >= cfg.KeepaliveInterval {
		c.lastKeepalive = now
		// A half-open connection waits for its peer's first packet: a
		// keepalive to an address not known to be the peer's is only
		// traffic for whoever is there (amplification.go).
		if !c.halfOpen.in {
			c.queueCtrl(ctrlPkt{op: OpKeepalive})
		}
	}
	for i := range c.tx {
		p := &c.tx[i]
		if p.failed {
			if now >= p.reprobeAt {
				c.reprobe(now, p)
			}
		} else if p.inUse > 0 && now >= p.lastProgress.Add(c.pathRTO(p)) {
			c.onPathTimeout(now, p)
		}
	}
}

// checkFailed finishes a message that failed once nothing refers to it.
func (c *Conn) checkFailed(m *txMsg) {
	if !m.finished && m.status != verbs.StatusSuccess && m.outstanding == 0 {
		m.finished = true
		m.qp.completeSends()
	}
}

// failMsg records a message's failure; it finishes once its outstanding
// packets are settled.
func (c *Conn) failMsg(m *txMsg, st verbs.Status) {
	if m.finished || m.status != verbs.StatusSuccess {
		return
	}
	m.status = st
	m.segDone = true
	c.checkFailed(m)
}

// breakStream puts q's send side in the error state after a message whose
// receive the peer never consumed (receiver not ready to the end): the
// peer's receives would no longer line up with our messages, so, as a verbs
// QP does on an error completion, every later work request is flushed and
// PostSend refuses new ones.
func (c *Conn) breakStream(q *QueuePair) {
	q.broken = true
	for i := 0; i < q.sq.Len(); i++ {
		m := *q.sq.At(i)
		if m.finished || m.status != verbs.StatusSuccess {
			continue
		}
		m.status, m.segDone = verbs.StatusFlushed, true
		m.finished = m.outstanding == 0
	}
	q.completeSends()
}

// checkDone finishes a message that has fully succeeded.
func (c *Conn) checkDone(m *txMsg) {
	if m.finished || m.status != verbs.StatusSuccess {
		return
	}
	if m.op == OpReadReq {
		if m.ackedChunks < 1 || !m.placed.full() {
			return
		}
	} else if !m.segDone || m.ackedChunks < m.nChunks {
		return
	}
	m.finished = true
	m.qp.completeSends()
}
