package rocev2

import (
	"errors"
	"fmt"
	"math"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

var _ verbs.Transport = (*Endpoint)(nil)

// cmReply is a CM message that does not belong to a live QP (REJ for a
// refused REQ, DREP for an unknown DREQ).
type cmReply struct {
	peer verbs.PeerHandle
	msg  CMMessage
}

// maxReplies bounds queued replies, so a flood of REQs cannot grow memory.
const maxReplies = 256

// Endpoint is one RoCEv2 port: the device context of the verbs-like API.
// It owns memory regions and QPs (one Conn per RC QP pair).
//
// The owner drives it through verbs.Transport: Receive for every
// arriving UDP payload, NextPacket until it reports nothing to send, and
// OnTimer whenever the clock reaches NextDeadline. None of them blocks or
// keeps a caller's buffer past the call.
//
// The endpoint paces everything it sends at LineRateBps (the port cannot
// send faster), and each QP's requests and READ responses at its DCQCN rate
// on top. So NextPacket may return false with work waiting: NextDeadline
// then says when to ask again.
type Endpoint struct {
	cfg     Config
	regions verbs.RegionTable

	qps      map[uint32]*Conn
	reqs     map[reqKey]*Conn // accepted QPs by the REQ that opened them (onREQ's repeat check)
	nextQPN  uint32
	accepted queue.Ring[*Conn]
	sched    queue.Scheduler[*Conn] // ready line and timers of the QPs
	replies  queue.Ring[cmReply]
	cmPSN    PSN
	nextTID  uint64

	now      verbs.Time // the latest time any entry point was called with
	portFree float64    // when the port may start the next packet, ns

	c EndpointCounters
}

// NewEndpoint validates cfg (after Defaults) and returns an endpoint.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Endpoint{cfg: cfg, qps: make(map[uint32]*Conn), reqs: make(map[reqKey]*Conn), nextQPN: cfg.QPNBase, nextTID: 1,
		sched: queue.NewScheduler[*Conn]()}, nil
}

// Config returns the effective configuration.
func (e *Endpoint) Config() Config { return e.cfg }

// Counters returns the endpoint-level counters (owner goroutine only).
func (e *Endpoint) Counters() *EndpointCounters { return &e.c }

// MaxPacketLen is the largest UDP payload the endpoint writes: BTH, RETH
// and ImmDt, a full MTU of payload and the ICRC (or a CM packet, if that is
// longer). NextPacket's buffer must be at least this long.
func (e *Endpoint) MaxPacketLen() int {
	return max(BTHLen+RETHLen+ImmLen+e.cfg.MTU+ICRCLen, CMPacketLen)
}

// AllocPD returns a new protection domain (ibv_alloc_pd).
func (e *Endpoint) AllocPD() *verbs.ProtectionDomain { return e.regions.AllocPD() }

// Connections returns the number of QPs that are not closed.
func (e *Endpoint) Connections() int { return len(e.qps) }

// ErrNoQPN is returned when every QP number is in use.
var ErrNoQPN = errors.New("rocev2: no free QP number")

func (e *Endpoint) newConn(now verbs.Time, peer verbs.PeerHandle) (*Conn, error) {
	if len(e.qps) >= e.cfg.MaxQPs {
		return nil, ErrNoQPN
	}
	for e.qps[e.nextQPN] != nil || e.nextQPN < 2 {
		e.nextQPN = (e.nextQPN + 1) & PSNMask
	}
	c := newConn(e, now, peer, e.nextQPN)
	e.nextQPN = (e.nextQPN + 1) & PSNMask
	e.qps[c.qpn] = c
	return c, nil
}

// Connect starts an RC connection to peer with a CM REQ. Work requests may
// be posted at once (after CreateQP); they go out once the peer's REP
// arrives. If it never does, the connection fails after ConnectRetries
// REQs and its work requests complete with StatusRetryExceeded or
// StatusFlushed.
func (e *Endpoint) Connect(now verbs.Time, peer verbs.PeerHandle) (*Conn, error) {
	c, err := e.newConn(now, peer)
	if err != nil {
		return nil, err
	}
	c.outbound = true
	c.state = stateConnecting
	c.tid = e.nextTID<<24 | uint64(c.qpn)
	e.nextTID++
	c.retryAt = now
	e.touch(c, now)
	return c, nil
}

// Accept returns the next connection a peer opened, if any. The peer's
// requests are answered with RNR NAKs until CreateQP gives the connection
// its protection domain and completion queues.
func (e *Endpoint) Accept() (*Conn, bool) {
	for e.accepted.Len() > 0 {
		if c := e.accepted.Pop(); c.state < stateClosed {
			return c, true
		}
	}
	return nil, false
}

// queueAccepted puts c in the accept queue, first dropping the QPs that
// died there when the queue has grown to MaxQPs (the live ones never
// exceed it), so the queue stays bounded.
func (e *Endpoint) queueAccepted(c *Conn) {
	if e.accepted.Len() >= e.cfg.MaxQPs {
		for i, n := 0, e.accepted.Len(); i < n; i++ {
			if o := e.accepted.Pop(); o.state < stateClosed {
				e.accepted.Push(o)
			}
		}
	}
	e.accepted.Push(c)
}

// reqKey names a REQ: who sent it, its communication id and transaction.
type reqKey struct {
	peer verbs.PeerHandle
	comm uint32
	tid  uint64
}

// forget removes a closed or failed QP.
func (e *Endpoint) forget(c *Conn) {
	if e.qps[c.qpn] == c {
		delete(e.qps, c.qpn)
	}
	if k := (reqKey{c.peer, c.rcommID, c.tid}); !c.outbound && e.reqs[k] == c {
		delete(e.reqs, k)
	}
	e.sched.Forget(&c.sched)
}

// reply queues a CM message outside any live QP.
func (e *Endpoint) reply(peer verbs.PeerHandle, m CMMessage) {
	if e.replies.Len() < maxReplies {
		e.replies.Push(cmReply{peer: peer, msg: m})
	}
}

func (e *Endpoint) seen(now verbs.Time) {
	if now > e.now {
		e.now = now
	}
}

// Receive processes one UDP payload from the wire. pkt is only read, and
// only during the call. Every packet is decoded and its ICRC checked before
// anything is placed; what fails is counted and dropped.
func (e *Endpoint) Receive(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	e.seen(now)
	e.c.RxPackets++
	var p Packet
	if err := p.Decode(pkt); err != nil {
		e.c.Malformed++
		return
	}
	if p.BTH.DestQP == GSIQP {
		e.receiveCM(now, pkt, &p, rx)
		return
	}
	c := e.qps[p.BTH.DestQP]
	if c == nil || c.state == stateConnecting {
		e.c.UnknownQP++
		return
	}
	if !CheckICRC(pkt, c.rxFlow) {
		e.c.ICRCDrops++
		c.c.ICRCDrops++
		return
	}
	c.receive(now, &p, rx, len(pkt))
	if c.state < stateClosed {
		e.touch(c, now)
	}
}

// touch recomputes c's timer and readiness after anything happened to it.
func (e *Endpoint) touch(c *Conn, now verbs.Time) {
	if c.state >= stateClosed {
		return
	}
	d, ready := c.computeDeadline(now)
	e.sched.SetDeadline(&c.sched, int64(d))
	if ready {
		e.sched.Requeue(&c.sched)
	}
}

// NextPacket writes the next UDP payload to send into buf and says where it
// goes. It returns false when nothing may be sent now: nothing is ready,
// the port is busy at line rate, or every QP with data is paced by DCQCN.
// buf must hold MaxPacketLen bytes; the endpoint keeps no reference to it.
func (e *Endpoint) NextPacket(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if len(buf) < e.MaxPacketLen() {
		panic(fmt.Sprintf("rocev2: NextPacket buffer of %d bytes, need %d", len(buf), e.MaxPacketLen()))
	}
	e.seen(now)
	if float64(now) < e.portFree {
		return verbs.TxMeta{}, false
	}
	if e.replies.Len() > 0 {
		r := e.replies.Pop()
		n := e.putCM(buf, r.peer, &r.msg)
		e.c.CMSent++
		if r.msg.Attr == AttrREJ {
			e.c.CMRejectsSent++
		}
		e.portUsed(now, n)
		return verbs.TxMeta{Len: n, Peer: r.peer, TxRoute: verbs.TxRoute{Entropy: verbs.Entropy(GSIPort), ECT: ecnCapable(buf[:n])}}, true
	}
	for c, ok := e.sched.PopReady(); ok; c, ok = e.sched.PopReady() {
		if meta, sent := c.produce(now, buf); sent {
			meta.ECT = ecnCapable(buf[:meta.Len])
			// Round robin: the QP goes to the back of the line if it
			// has more to send now.
			e.touch(c, now)
			e.portUsed(now, meta.Len)
			return meta, true
		}
		// Nothing may go now: an ACK or the deadline makes it ready again.
		d, _ := c.computeDeadline(now)
		e.sched.SetDeadline(&c.sched, int64(d))
	}
	return verbs.TxMeta{}, false
}

// portUsed accounts a packet of n bytes on the port's line-rate pacer.
func (e *Endpoint) portUsed(now verbs.Time, n int) {
	e.portFree = max(e.portFree, float64(now)) + txDuration(n+e.cfg.FrameOverhead, e.cfg.LineRateBps)
}

// NextDeadline is the earliest time OnTimer (or NextPacket, for work the
// port pacer holds back) must run; Never if none.
func (e *Endpoint) NextDeadline() verbs.Time {
	d := verbs.Time(e.sched.NextDeadline())
	if e.sched.ReadyLen() > 0 || e.replies.Len() > 0 {
		if pf := verbs.Time(math.Ceil(e.portFree)); pf > e.now && pf < d {
			d = pf
		}
	}
	return d
}

// OnTimer runs every timer due at now: local ACK timeouts, RNR waits, DCQCN
// pacing, CM retransmissions.
func (e *Endpoint) OnTimer(now verbs.Time) {
	e.seen(now)
	e.sched.Expire(int64(now), func(c *Conn) {
		c.onTimer(now)
		e.touch(c, now)
	})
}
