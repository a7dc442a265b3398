package metaroce

import "time"

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
	pending bool   // queued for resend, not yet resent
	nop     bool   // resend as NOP: the packet was refused or its message abandoned
	attempt uint16 // msg.attempt when the packet was built (RNR restarts bump it)
	msg     *txMsg
	job     *readJob
	offset  uint32
	length  uint32
	txSeq   uint64 // path transmission counter at the last (re)send
	sentAt  Time
}

// txPath is the sender's view of one path: its sequence space, window,
// RTT estimate and health.
type txPath struct {
	id      PathID
	entropy Entropy
	plane   PlaneID
	gen     uint16

	next    PSN // next new PSN
	una     PSN // oldest unacknowledged PSN; every PSN before it is retired
	slots   []txSlot
	mask    uint32
	inUse   int // slots between una and next not yet acknowledged
	window  int
	txSeq   uint64 // transmissions on this path, for loss detection
	ackedTx uint64 // highest txSeq among acknowledged packets

	srtt, rttvar time.Duration
	hasRTT       bool

	lastProgress Time // last ACK that retired something, or last send into an idle path
	timeouts     int  // consecutive tail-loss timeouts without progress
	failed       bool
	reprobeAt    Time
	reprobeWait  time.Duration

	ecnSeen  uint32 // last cumulative CE count reported by the peer
	rateHint uint32 // last rate hint from the peer (Mbit/s, 0 = none)

	c PathCounters
}

func newTxPath(id PathID, entropy Entropy, plane PlaneID, window int) txPath {
	n := 1
	for n < window+1 {
		n <<= 1
	}
	return txPath{id: id, entropy: entropy, plane: plane, window: window,
		slots: make([]txSlot, n), mask: uint32(n - 1)}
}

func (p *txPath) slot(psn PSN) *txSlot { return &p.slots[uint32(psn)&p.mask] }

// room is how many new packets the path may send now.
func (p *txPath) room() int {
	if p.failed {
		return 0
	}
	// The span una..next must stay within the receiver's SACK reach and
	// the slot ring, whatever the window.
	span := int(p.una.Distance(p.next))
	r := p.window - p.inUse
	if s := SackBits - span; s < r {
		r = s
	}
	if s := len(p.slots) - 1 - span; s < r {
		r = s
	}
	if r < 0 {
		return 0
	}
	return r
}

// rto is the tail-loss timeout: srtt + 4·rttvar (+ the peer's ACK delay),
// doubled for every consecutive timeout, within [MinRTO, MaxRTO].
func (p *txPath) rto(cfg *Config) time.Duration {
	d := cfg.InitialRTO
	if p.hasRTT {
		d = p.srtt + 4*p.rttvar + cfg.AckDelay
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

// sampleRTT folds one RTT sample into the estimate (RFC 6298 gains).
func (p *txPath) sampleRTT(r time.Duration) {
	if r <= 0 {
		return
	}
	if !p.hasRTT {
		p.srtt, p.rttvar, p.hasRTT = r, r/2, true
		return
	}
	diff := p.srtt - r
	if diff < 0 {
		diff = -diff
	}
	p.rttvar += (diff - p.rttvar) / 4
	p.srtt += (r - p.srtt) / 8
}

// SRTT is the smoothed RTT estimate (0 before the first sample).
func (p *txPath) SRTT() time.Duration { return p.srtt }

// restart begins a new generation of the sequence space, after the path's
// outstanding packets have been moved elsewhere.
func (p *txPath) restart() {
	p.gen++
	p.next, p.una, p.inUse = 0, 0, 0
	clear(p.slots)
	p.txSeq, p.ackedTx = 0, 0
	p.timeouts = 0
}

// rxPath is the receiver's view of one path.
type rxPath struct {
	gen     uint16
	sb      rxScoreboard
	ecn     uint32 // CE-marked packets received (cumulative, wraps)
	tsEcho  Time
	unacked int  // packets since the last ACK of this path
	ackDue  Time // latest time an ACK must go out (Never when nothing pending)
	ackNow  bool // acknowledge at the next opportunity
	queued  bool // in the connection's ACK list
	c       *PathCounters
}
