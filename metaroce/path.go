package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// slotKind says what a sequenced packet carried, so it can be rebuilt for a
// resend without keeping the packet bytes.
type slotKind uint8

const (
	slotFree     slotKind = iota
	slotData              // WRITE*, SEND*, READ_REQ of a txMsg
	slotReadResp          // READ_RESP chunk of a readJob
	slotNop               // tail probe or tombstone
)

// txSlot records one outstanding sequenced packet of a path.
type txSlot struct {
	kind    slotKind
	pending bool // queued for resend, not yet resent
	nop     bool // resend as NOP: the packet was refused or its message abandoned
	// moved: the slot's data was moved to another path (moveOutstanding)
	// and it has carried nothing but that data, so its ACK says the chunk
	// arrived (and the moved copy, if not yet sent, is cancelled). Cleared
	// when it is resent (as a NOP), after which its ACK says nothing.
	moved   bool
	sent    bool   // transmitted at least once
	attempt uint16 // msg.attempt when the packet was built (RNR restarts bump it)
	msg     *txMsg
	job     *readJob
	offset  uint32
	length  uint32
	sentAt  verbs.Time // stamp of the last (re)transmission (see txPath.stamp)
}

// fill makes s the record of a new packet carrying [offset,
// offset+length) of msg or job, everything else cleared. It assigns the
// fields one by one: the composite literal `*s = txSlot{...}` builds the
// struct on the stack (it has too many fields to live in registers) with
// narrow stores, then copies it with wide loads that stall on them (a
// store-to-load forwarding stall), on every data packet.
func (s *txSlot) fill(kind slotKind, msg *txMsg, job *readJob, attempt uint16, offset, length uint32) {
	*s = txSlot{}
	s.kind, s.msg, s.job, s.attempt, s.offset, s.length = kind, msg, job, attempt, offset, length
}

// txPath is the sender's view of one path: its sequence space, window,
// RTT estimate and health.
type txPath struct {
	id      verbs.PathID
	entropy verbs.Entropy
	plane   verbs.PlaneID
	gen     uint16

	isn   uint64 // initial-PSN key (isnKey)
	next  PSN    // next new PSN
	una   PSN    // oldest unacknowledged PSN; every PSN before it is retired
	slots []txSlot
	mask  uint32
	inUse int // slots between una and next not yet acknowledged
	cc    pathCC
	// speed is speedOne·(fastest path's srtt)/srtt (1..speedOne): the
	// spraying weight of the path's RTT, updated with each RTT sample.
	speed int
	// Every transmission on a path carries a distinct, increasing stamp
	// (the send time, nudged forward by 1 ns when two would tie), and the
	// receiver echoes the newest stamp it has received. So an echo names
	// exactly one transmission: a packet stamped earlier and still
	// unacknowledged was overtaken on a FIFO path, so it is lost — with no
	// ambiguity about which copy of a resent packet arrived.
	lastStamp verbs.Time // stamp of the newest transmission
	delivered verbs.Time // newest stamp the receiver has echoed

	rttEstimator

	lastProgress verbs.Time // last ACK that retired something, or last send into an idle path
	lastAck      verbs.Time // last ACK that retired something
	timeouts     int        // consecutive tail-loss timeouts without progress
	// toStamp is the stamp of the newest transmission when the path last
	// timed out (0: no timeout to judge). An ACK that retires packets and
	// echoes a stamp at most toStamp proves that timeout spurious: a
	// transmission made before it got through, and nothing sent after it
	// has been seen yet (Conn.checkSpurious).
	toStamp verbs.Time
	// silentFrom: the last progress before the first timeout of the
	// current silence (valid while timeouts > 0).
	silentFrom verbs.Time
	// peak is the path's longest RTT sample within the last peakMemory
	// (halved for each peakMemory without a sample that raised it), and
	// peakAt when it was last raised or halved (Conn.patience).
	peak   time.Duration
	peakAt verbs.Time
	failed bool
	// uncounted: the path's packets are not counted in the connection's
	// in-flight cap (connLimit.inflight). True while it is failed, and
	// from a timeout that moved its data elsewhere until an ACK shows it
	// moving again: what it holds then is probes and filler, which must
	// not hold the connection's data back (a path dead before its first
	// use would otherwise block a connection still in slow start until
	// the path is judged failed, RTOs later).
	uncounted   bool
	reprobeAt   verbs.Time
	reprobeWait time.Duration
	restoredAt  verbs.Time // when a re-probe last brought the path back
	// rerolling: the path takes no new packets until its outstanding ones
	// are settled, then restarts with a new entropy (Conn.reroll).
	rerolling bool
	// unproven: no ACK of the receiver has named the path's generation
	// yet, so its sequenced packets carry the generation's proof in
	// place of the stamp (genproof.go). False in generation 0, where
	// both ends start.
	unproven bool

	ecnSeen uint32 // last cumulative CE count reported by the peer

	agg pathAgg // the path's entries in Conn.agg

	c PathCounters
}

func newTxPath(id verbs.PathID, entropy verbs.Entropy, plane verbs.PlaneID, window int, isn uint64) txPath {
	n := 1
	for n < window+1 {
		n <<= 1
	}
	first := initialPSN(isn, 0)
	return txPath{id: id, entropy: entropy, plane: plane, cc: pathCC{cwnd: float64(window)}, mask: uint32(n - 1), speed: speedOne,
		isn: isn, next: first, una: first, agg: newPathAgg()}
}

// isnKey derives a path's initial-PSN key for the direction from the end
// with connection id src to the one with id dst (§8.1): both ends know
// both ids, which are random (Endpoint.newConn), so the first PSN of every
// generation of every path is as hard to guess off-path as the two ids,
// and no field is added to CONNECT or ACCEPT.
func isnKey(src, dst *Token, path int) uint64 {
	s, d := src.key(), dst.key()
	return verbs.Mix64(s.k0^verbs.Mix64(d.k1^verbs.Mix64(s.k1^d.k0))) + uint64(path)<<16
}

// initialPSN is the first PSN of generation gen of the path with key isn.
func initialPSN(isn uint64, gen uint16) PSN { return PSN(verbs.Mix64(isn + uint64(gen))) }

// ringLen is the size of the slot ring (allocated on first send, so a
// path that only ever receives costs no ring).
func (p *txPath) ringLen() int { return int(p.mask) + 1 }

func (p *txPath) slot(psn PSN) *txSlot {
	if p.slots == nil {
		p.slots = make([]txSlot, p.ringLen())
	}
	return &p.slots[uint32(psn)&p.mask]
}

// room is how many new packets the path may send now.
func (p *txPath) room() int {
	if p.failed || p.rerolling {
		return 0
	}
	// The span una..next must stay within the receiver's SACK reach and
	// the slot ring, whatever the window.
	span := int(p.una.Distance(p.next))
	r := p.cc.window() - p.inUse
	if s := SackBits - span; s < r {
		r = s
	}
	if s := p.ringLen() - 1 - span; s < r {
		r = s
	}
	if r < 0 {
		return 0
	}
	return r
}

// rto is the tail-loss timeout: srtt + 4·rttvar (+ the peer's ACK delay),
// doubled for every consecutive timeout, within [MinRTO, MaxRTO].
//
// A path without samples of its own borrows the connection-wide estimate
// (conn, which may be a zero estimator), or its upper bound from connection
// setup: all paths of a connection span the same fabric, and InitialRTO is
// far too long to wait on a path that was dead before its first use.
func (p *txPath) rto(cfg *Config, conn *rttEstimator) time.Duration {
	d := cfg.InitialRTO
	switch {
	case p.hasRTT:
		d = p.srtt + 4*p.rttvar + cfg.AckDelay
	case conn.hasRTT:
		d = conn.srtt + 4*conn.rttvar + cfg.AckDelay
	case conn.bound > 0:
		d = conn.bound + cfg.AckDelay
	}
	if d < cfg.MinRTO {
		d = cfg.MinRTO
	}
	for i := 0; i < p.timeouts && d < cfg.MaxRTO; i++ {
		d *= 2
	}
	if d > cfg.MaxRTO {
		d = cfg.MaxRTO
	}
	return d
}

// stamp returns the send stamp for a transmission at now.
func (p *txPath) stamp(now verbs.Time) verbs.Time {
	if now <= p.lastStamp {
		now = p.lastStamp + 1
	}
	p.lastStamp = now
	return now
}

// rttEstimator is a smoothed RTT and its variation (RFC 6298 gains).
type rttEstimator struct {
	srtt, rttvar time.Duration
	hasRTT       bool
	// bound, when not 0, is an upper bound on the RTT known before any
	// sample (the acceptor's ACCEPT-to-first-packet time); rto uses it
	// while hasRTT is false.
	bound time.Duration
}

// sample folds one RTT sample into the estimate.
func (e *rttEstimator) sample(r time.Duration) {
	if r <= 0 {
		return
	}
	if !e.hasRTT {
		e.srtt, e.rttvar, e.hasRTT = r, r/2, true
		return
	}
	diff := e.srtt - r
	if diff < 0 {
		diff = -diff
	}
	e.rttvar += (diff - e.rttvar) / 4
	e.srtt += (r - e.srtt) / 8
}

// restart begins a new generation of the sequence space, after the path's
// outstanding packets have been moved elsewhere.
func (p *txPath) restart() {
	p.gen++
	first := initialPSN(p.isn, p.gen)
	p.next, p.una, p.inUse = first, first, 0
	clear(p.slots)
	p.delivered = 0
	p.timeouts = 0
	p.toStamp = 0 // an old generation's ACKs are not read
	p.unproven = true
}

// rxPath is the receiver's view of one path.
type rxPath struct {
	gen     uint16
	isn     uint64 // the peer's initial-PSN key for this path (isnKey)
	sb      rxScoreboard
	ecn     uint32 // CE-marked packets received (cumulative, wraps)
	tsEcho  verbs.Time
	unacked int        // packets since the last ACK of this path
	ackDue  verbs.Time // latest time an ACK must go out (Never when nothing pending)
	ackNow  bool       // acknowledge at the next opportunity
	queued  bool       // in the connection's ACK list
	agg     ackAgg     // the pending ACK's entry in Conn.agg
	c       *PathCounters
}

// restart adopts generation gen of the peer's sequence space: an empty
// scoreboard whose cumulative point is the generation's first PSN.
func (r *rxPath) restart(gen uint16) {
	r.gen = gen
	r.sb.reset()
	r.sb.cum = initialPSN(r.isn, gen)
}
