package metaroce

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

// reply is an unsequenced answer that does not belong to a live connection
// (RESET for an unknown connection, CLOSE_ACK after the connection is gone).
type reply struct {
	peer     verbs.PeerHandle
	op       Opcode
	dst, src ConnID
	// tok, when set, is the receiver's token the answer proves (token.go):
	// a CLOSE_ACK of a connection just closed, the refusal of a CONNECT
	// (whose token it echoes). Without one (the endpoint does not know the
	// connection) the answer carries no proof, and its receiver ignores it.
	tok    Token
	hasTok bool
}

// maxReplies bounds queued replies, so a flood of packets for unknown
// connections cannot grow memory.
const maxReplies = 256

// Endpoint is one protocol instance: the device context of the verbs-like
// API. It owns memory regions, connections and their queue pairs.
//
// The owner drives it with three calls: Receive for every arriving packet,
// NextPacket until it reports nothing to send, and OnTimer whenever the
// clock reaches NextDeadline. None of them blocks or keeps a caller's
// buffer past the call.
type Endpoint struct {
	cfg     Config
	regions verbs.RegionTable
	nextQPN verbs.QPN // the last queue pair number given out

	conns    map[ConnID]*Conn
	lastConn *Conn        // the connection conn last found (a burst mostly names one)
	rand     verbs.Random // Config.Rand or its seeded default
	ordinal  ConnID       // connections created so far (Conn.ordinal)
	accepted connList     // inbound connections not yet taken by Accept (admission.go)
	halfOpen connList     // inbound connections whose peer has not shown it is there
	resets   tokenBucket
	stale    []*Conn                // scratch for peerSeen
	sched    queue.Scheduler[*Conn] // ready line and timers of the connections
	replies  queue.Ring[reply]
	planeRR  int         // the plane the next new packet should take (Conn.pickPath)
	share    fairShare   // the receiver's rate hints (ratehint.go)
	ready1   uint32      // planes whose ports have room (SetReadyPlanes); 0 = all
	peers    peerIndex   // connections by peer (peers.go)
	sec      endpointSec // the sealed modes (seal.go)

	c EndpointCounters

	scat scatterState  // the NextPacketScatter call running, if any (scatter.go)
	coal coalesceState // the datagram NextPacket last built (coalesce.go)
}

// NewEndpoint validates cfg (after Defaults) and returns an endpoint.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Endpoint{cfg: cfg, conns: make(map[ConnID]*Conn), rand: cfg.Rand,
		sched:    queue.NewScheduler[*Conn](),
		accepted: connList{link: acceptLink}, halfOpen: connList{link: halfOpenLink}}
	if e.rand == nil {
		e.rand = verbs.NewSeededRandom(uint64(cfg.Node)*0x9e3779b97f4a7c15 ^ uint64(cfg.Incarnation))
	}
	for e.cfg.Incarnation == 0 {
		e.cfg.Incarnation = Incarnation(e.rand.Uint64())
	}
	e.regions.SetRandom(e.rand)
	if err := e.initSecurity(); err != nil {
		return nil, err
	}
	return e, nil
}

// Config returns the endpoint's effective configuration.
func (e *Endpoint) Config() Config { return e.cfg }

// Counters returns the endpoint-level counters (owner goroutine only).
func (e *Endpoint) Counters() *EndpointCounters { return &e.c }

// MaxPacketLen is the largest packet the endpoint writes or accepts; the
// buffers passed to NextPacket must be at least this long.
func (e *Endpoint) MaxPacketLen() int { return HeaderLen + MaxMsgHeaderLen + e.cfg.MTU + e.sec.trailer }

// AllocPD returns a new protection domain (ibv_alloc_pd).
func (e *Endpoint) AllocPD() *verbs.ProtectionDomain { return e.regions.AllocPD() }

// Connections returns the number of live connections.
func (e *Endpoint) Connections() int { return len(e.conns) }

// ErrTooManyConns is returned when the endpoint holds Config.MaxConns
// connections.
var ErrTooManyConns = errors.New("metaroce: too many connections (max_conns)")

func (e *Endpoint) newConn(peer verbs.PeerHandle, now verbs.Time) (*Conn, error) {
	if len(e.conns) >= e.cfg.MaxConns {
		return nil, ErrTooManyConns
	}
	// A random id (§7.1): an off-path sender must guess it to be taken for
	// this connection's peer. The ordinal, not the id, derives what must
	// stay reproducible (the paths' source ports, timer jitter).
	id := ConnID(e.rand.Uint64())
	for id == 0 || e.conns[id] != nil {
		id = ConnID(e.rand.Uint64())
	}
	e.ordinal++
	c := &Conn{ep: e, local: id, ordinal: e.ordinal, peer: peer,
		lastRx: now, tokLocal: newToken(e.rand)}
	c.sched.Init(c)
	c.agg.reset()
	e.conns[c.local] = c
	return c, nil
}

// Connect starts a connection to peer. Work requests may be posted at
// once; they go out when the peer accepts. If the peer never answers, the
// connection fails after ConnectRetries attempts and its work requests
// complete with StatusRetryExceeded or StatusFlushed.
func (e *Endpoint) Connect(now verbs.Time, peer verbs.PeerHandle) (*Conn, error) {
	c, err := e.newConn(peer, now)
	if err != nil {
		return nil, err
	}
	c.outbound = true
	c.state = connConnecting
	c.retryAt = now
	e.touch(c, now)
	return c, nil
}

// Accept returns the next connection a peer opened, if any. The queue
// holds live connections only (one that fails before it is taken leaves
// it) and at most AcceptBacklog of them.
func (e *Endpoint) Accept() (*Conn, bool) {
	c := e.accepted.popFront()
	return c, c != nil
}

// conn is e.conns[id], without the map lookup when id is the connection
// found last.
func (e *Endpoint) conn(id ConnID) *Conn {
	if c := e.lastConn; c != nil && c.local == id {
		return c
	}
	c := e.conns[id]
	if c != nil {
		e.lastConn = c
	}
	return c
}

// forget removes a closed or failed connection.
func (e *Endpoint) forget(c *Conn) {
	delete(e.conns, c.local)
	if e.lastConn == c {
		e.lastConn = nil
	}
	e.peers.remove(c)
	e.accepted.remove(c)
	e.halfOpen.remove(c)
	e.sched.Forget(&c.sched)
}

// reply queues an unsequenced answer outside any connection, without
// proof.
func (e *Endpoint) reply(peer verbs.PeerHandle, op Opcode, dst, src ConnID) {
	e.replyProving(reply{peer: peer, op: op, dst: dst, src: src})
}

// replyProving queues r (with its token, if it has one).
func (e *Endpoint) replyProving(r reply) {
	if e.replies.Len() < maxReplies {
		e.replies.Push(r)
	}
}

// peerSeen fails every other connection to c's peer node at c's peer
// address that belongs to another incarnation: the peer restarted and
// lost their state, so their work requests can never finish. It runs once
// the peer has proven it is there (an ACCEPT to our CONNECT, the first
// packet after our ACCEPT), never on a CONNECT alone, and it looks at
// connections to the same address only: a packet from elsewhere that
// names a node's id cannot end that node's connections.
func (e *Endpoint) peerSeen(c *Conn) {
	e.peers.addGroup(c)
	e.stale = e.peers.staleFor(c, e.stale[:0])
	for i, o := range e.stale {
		e.stale[i] = nil
		e.c.PeerRestarts++
		o.fail(verbs.StatusRetryExceeded, verbs.FailPeerRestart)
	}
}

// Receive processes one datagram from the wire: a packet, or several
// coalesced in one (coalesce.go). pkt is only read, and only
// during the call. Every packet is checked (CRC32C, header, extension,
// connection, incarnation, keys, bounds) before anything is placed; what
// fails is counted and dropped or answered.
func (e *Endpoint) Receive(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	e.coal.c = nil
	if len(pkt) > 0 && pkt[0] == CoalesceMark {
		e.receiveCoalesced(now, pkt, rx)
		return
	}
	e.receiveOne(now, pkt, rx)
}

// receiveOne handles one packet (alone in its datagram or split out of a
// coalesced one).
func (e *Endpoint) receiveOne(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	e.c.RxPackets++
	if len(pkt) > e.MaxPacketLen() {
		e.c.Malformed++
		return
	}
	if e.sec.mode != SecurityNone {
		e.receiveSealed(now, pkt, rx)
		return
	}
	var h Header
	body, err := CheckCRC(pkt)
	if err != nil {
		if len(pkt) >= HeaderLen && HeaderFlags(pkt[3])&FlagSealed != 0 {
			e.c.SealMismatch++ // a sealed packet (seal.go), to mode none
			return
		}
		e.c.CRCDrops++
		// Attribute the drop to the connection the (unverified) header names.
		if err == ErrCRC && h.Decode(pkt) == nil {
			if c := e.conns[h.DstConn]; c != nil {
				c.c.CRCDrops++
			}
		}
		return
	}
	if h.Decode(body) != nil {
		if h.decode(body, flagsKnown|flagsSeal) == nil {
			e.c.SealMismatch++ // a sealed packet, to mode none
		} else {
			e.c.Malformed++
		}
		return
	}
	e.dispatch(now, &h, body, body[HeaderLen:], rx, nil, len(pkt))
}

// dispatch handles a packet whose CRC or seal checked and whose header
// decoded; body is everything between the header and the trailer. raw is
// the header and body in mode none (the packet as received, without its
// CRC), what a token's tag and a generation's proof cover (token.go,
// genproof.go); nil for an unsealed packet, whose AEAD tag proved more. c is the
// connection dst_conn names, when the caller has looked it up; n is the
// packet's length on the wire (amplification.go).
func (e *Endpoint) dispatch(now verbs.Time, h *Header, raw, body []byte, rx verbs.RxMeta, c *Conn, n int) {
	if (h.Opcode.headerOnly() && len(body) != 0) || (h.Flags&FlagGenProof != 0 && !h.Opcode.Sequenced()) {
		// A body where there is none, or a generation's proof where the
		// timestamp field is the tag (genproof.go).
		e.c.Malformed++
		return
	}
	if h.Opcode == OpConnect {
		e.onConnect(now, h, body, rx, n)
		return
	}
	if c == nil {
		c = e.conn(h.DstConn)
	}
	if c != nil && c.halfOpen.in && rx.Peer == c.peer {
		c.amp.rx += uint64(n) // what the address spent (amplification.go)
	}
	if c == nil {
		e.c.UnknownConn++
		switch h.Opcode {
		case OpReset, OpCloseAck:
		case OpClose:
			// We closed already and our CLOSE_ACK was lost: repeat it, so
			// the peer's orderly close does not end in a RESET. It is
			// the size of a RESET and as limited.
			if e.resets.take(now, e.cfg.ResetRate, e.cfg.ResetBurst) {
				e.reply(rx.Peer, OpCloseAck, h.SrcConn, h.DstConn)
			} else {
				e.c.ResetsLimited++
			}
		default:
			e.resetTo(now, rx.Peer, h.SrcConn, h.DstConn)
		}
		return
	}
	c.receive(now, h, raw, body, rx)
	if c.state < connClosed {
		e.touch(c, now)
	}
}

// onConnect accepts (or refuses) a connection request.
func (e *Endpoint) onConnect(now verbs.Time, h *Header, body []byte, rx verbs.RxMeta, n int) {
	var b ConnectBody
	if err := b.Decode(body); err != nil || h.SrcConn == 0 || h.DstConn != 0 {
		e.c.Malformed++
		return
	}
	if !e.cfg.AcceptIncoming {
		e.c.RefusedNotAccepting++
		e.refuse(now, rx.Peer, h.SrcConn, &b.Token)
		return
	}
	if c := e.peers.accepted(rx.Peer, b.Node, h.Incarnation, h.SrcConn); c != nil {
		// A repeated request: our ACCEPT was lost.
		if c.halfOpen.in {
			c.amp.rx += uint64(n)
		}
		if c.state == connEstablished {
			c.acceptPath = h.Path % verbs.PathID(c.paths)
			c.queueCtrl(ctrlPkt{op: OpAccept})
			e.touch(c, now)
		}
		return
	}
	if !e.admit(rx.Peer) {
		e.refuse(now, rx.Peer, h.SrcConn, &b.Token)
		return
	}
	c, err := e.newConn(rx.Peer, now)
	if err != nil { // ErrTooManyConns, which admit has ruled out
		e.c.RefusedMaxConns++
		e.refuse(now, rx.Peer, h.SrcConn, &b.Token)
		return
	}
	// Established at once (no extra round trip), but without its paths
	// and outside restart detection until the peer proves it is there
	// (Conn.prove): until then it costs a Conn and its map entries.
	c.remote, c.peerInc, c.peerNode, c.tokRemote = h.SrcConn, h.Incarnation, b.Node, b.Token
	c.establish(now, &b)
	e.keyAccepted(now, c)
	c.acceptPath = h.Path % verbs.PathID(c.paths)
	c.amp.rx = uint64(n)
	e.peers.addInbound(c)
	e.halfOpen.pushBack(c)
	c.queueCtrl(ctrlPkt{op: OpAccept})
	e.accepted.pushBack(c)
	e.touch(c, now)
}

// touch recomputes c's timer and readiness after anything happened to it.
func (e *Endpoint) touch(c *Conn, now verbs.Time) {
	if c.state >= connClosed {
		return
	}
	d, ready := c.computeDeadline(now)
	e.sched.SetDeadline(&c.sched, int64(d))
	if ready {
		e.sched.Requeue(&c.sched)
	}
}

// NextPacket writes the next packet to send into buf and says where it
// goes. It returns false when nothing is ready now. buf must hold
// MaxPacketLen bytes; the endpoint keeps no reference to it.
func (e *Endpoint) NextPacket(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if len(buf) < e.MaxPacketLen() {
		panic(fmt.Sprintf("metaroce: NextPacket buffer of %d bytes, need %d", len(buf), e.MaxPacketLen()))
	}
	e.coal.c = nil
	if e.replies.Len() > 0 {
		r := e.replies.Pop()
		h := Header{Opcode: r.op, DstConn: r.dst, SrcConn: r.src, Incarnation: e.cfg.Incarnation, Timestamp: now}
		h.Put(buf)
		if r.hasTok && e.sec.mode == SecurityNone {
			putTag(buf, HeaderLen, &r.tok)
		}
		n := e.sealReply(buf, HeaderLen)
		return verbs.TxMeta{Len: n, Peer: r.peer, TxRoute: verbs.TxRoute{Entropy: e.cfg.EntropyBase, ECT: true}}, true
	}
	for c, ok := e.sched.PopReady(); ok; c, ok = e.sched.PopReady() {
		backlog := c.limit.inflight
		if meta, sent := c.produce(now, buf); sent {
			if (e.scat.out == nil || e.scat.out.Payload == nil) && !roundTripBound(backlog, c.limit.inflight) {
				e.coal.c, e.coal.path = c, meta.Path // it may take follow-ons (coalesce.go)
			}
			e.planeRR = (int(meta.Plane) + 1) % e.cfg.Planes
			// Round robin: the connection goes to the back of the line,
			// ready or not; a turn that finds nothing to send parks it.
			e.touch(c, now)
			e.sched.Requeue(&c.sched)
			return meta, true
		}
		// Whatever work is left needs window room or time: an ACK or a
		// timer makes the connection ready again.
		d, _ := c.computeDeadline(now)
		e.sched.SetDeadline(&c.sched, int64(d))
	}
	return verbs.TxMeta{}, false
}

// SetReadyPlanes implements PlaneSteering.
func (e *Endpoint) SetReadyPlanes(mask uint32) { e.ready1 = mask }

// NextDeadline is the earliest time OnTimer must run (Never if none).
func (e *Endpoint) NextDeadline() verbs.Time { return verbs.Time(e.sched.NextDeadline()) }

// OnTimer runs every timer due at now: tail-loss probes, path failure and
// re-probing, ACK delays, RNR back-offs, keepalives, peer-dead detection,
// connect and close retries.
func (e *Endpoint) OnTimer(now verbs.Time) {
	e.coal.c = nil
	e.sched.Expire(int64(now), func(c *Conn) {
		c.onTimer(now)
		e.touch(c, now)
	})
}
