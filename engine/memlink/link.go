package memlink

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Side names an end of the link. Packets sent from A arrive at B and the
// reverse.
type Side uint8

const (
	A Side = 0
	B Side = 1
)

// Other returns the opposite side.
func (s Side) Other() Side { return 1 - s }

func (s Side) String() string {
	switch s {
	case A:
		return "A"
	case B:
		return "B"
	}
	return fmt.Sprintf("Side(%d)", uint8(s))
}

// PathKey names the path a packet travels: its entropy (the UDP source
// port a sprayer rewrites) on a plane. Per-path impairments match on it.
type PathKey struct {
	Entropy uint16
	Plane   uint8
}

// Config sets the link's delay, rate and impairments. The zero value (plus
// a Seed) is a lossless link with zero delay and infinite rate. New copies
// the Config, so changing the caller's PathLoss map or Blackouts slice
// afterwards has no effect.
//
// For each packet, Send applies in this order: serialization (RateBps),
// Blackouts, Bursty, PathLoss, Loss (a packet dropped by one cause is
// counted under that cause only), then PathDelay, Jitter, Holds, Reorder,
// Duplicate and, for each copy, Corrupt.
type Config struct {
	// Seed seeds the link's random source: equal Configs and equal call
	// sequences give identical deliveries.
	Seed int64

	// Delay is the one-way propagation delay in ns, added to every packet.
	Delay int64
	// RateBps, when > 0, is the serialization rate of each direction in
	// bits per second. Packets queue FIFO behind earlier ones from the same
	// side (the queue is unbounded) and leave the sender len*8/RateBps
	// seconds apart. Dropped packets occupy the serializer too: loss
	// happens downstream of the sender. 0 means infinite rate.
	RateBps float64
	// PathDelay, when set, returns extra delay in ns (>= 0) for a path,
	// modelling paths of different lengths. It must be deterministic.
	PathDelay func(k PathKey) int64
	// Jitter, when > 0, adds to each delivered packet an extra delay drawn
	// uniformly from [0, Jitter] ns (queueing that varies packet to
	// packet), so packets of one path overtake each other too.
	Jitter int64
	// Holds delay the packets of a path for a while (see Hold).
	Holds []Hold

	// Loss is the probability that any packet is dropped.
	Loss float64
	// PathLoss adds a drop probability for packets whose PathKey.Entropy
	// is the map key, on every plane.
	PathLoss map[uint16]float64
	// Bursty, when set, adds Gilbert–Elliott bursty loss, with its own
	// state for each direction.
	Bursty *GilbertElliott
	// Blackouts kill paths from a given time on.
	Blackouts []Blackout

	// Reorder is the probability that a packet is held ReorderDelay ns
	// longer than it would be, so that later packets overtake it.
	Reorder      float64
	ReorderDelay int64
	// Duplicate is the probability that a packet is delivered twice. The
	// copy is due at the same time and arrives right after the original.
	Duplicate float64
	// Corrupt is the probability that a delivered copy has one random bit
	// flipped. The flip is made in the link's copy, never in the caller's
	// buffer. Empty packets are never corrupted.
	Corrupt float64
}

func (c *Config) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"Loss", c.Loss}, {"Reorder", c.Reorder}, {"Duplicate", c.Duplicate}, {"Corrupt", c.Corrupt},
	} {
		if !isProb(p.v) {
			return fmt.Errorf("probability %s = %v, want one in [0,1]", p.name, p.v)
		}
	}
	for e, p := range c.PathLoss {
		if !isProb(p) {
			return fmt.Errorf("probability PathLoss[%d] = %v, want one in [0,1]", e, p)
		}
	}
	if c.Bursty != nil {
		if err := c.Bursty.validate(); err != nil {
			return err
		}
	}
	if c.Delay < 0 || c.ReorderDelay < 0 || c.Jitter < 0 {
		return fmt.Errorf("negative delay: Delay = %d, ReorderDelay = %d, Jitter = %d", c.Delay, c.ReorderDelay, c.Jitter)
	}
	for _, h := range c.Holds {
		if h.Extra < 0 {
			return fmt.Errorf("negative delay: Hold.Extra = %d", h.Extra)
		}
	}
	if !(c.RateBps >= 0) || math.IsInf(c.RateBps, 0) {
		return fmt.Errorf("rate RateBps = %v, want a finite value >= 0", c.RateBps)
	}
	return nil
}

// Link is a deterministic two-sided link. Create it with New.
//
// A Link belongs to one goroutine: no method is safe for concurrent use.
type Link struct {
	cfg      Config
	bursty   GilbertElliott // copy of *cfg.Bursty, valid when hasBurst
	hasBurst bool
	rng      *rand.Rand

	inflight flightHeap
	pool     bufPool
	seq      uint64

	busyUntil  [2]float64 // per direction: when the serializer frees, ns
	bad        [2]bool    // per direction: Gilbert–Elliott state
	delivering bool
	stats      Stats
}

// pcgStream is the second PCG seed word, a fixed constant, so that the
// link's random sequence depends on Config.Seed alone.
const pcgStream = 0x6d656d6c696e6b31 // "memlink1"

// New returns a link configured by cfg. It panics if cfg is invalid (a
// probability outside [0,1], a negative delay or rate): that is a
// programming error, not a run-time condition.
func New(cfg Config) *Link {
	if err := cfg.validate(); err != nil {
		panic("memlink: invalid Config: " + err.Error())
	}
	l := &Link{rng: rand.New(rand.NewPCG(uint64(cfg.Seed), pcgStream))}
	if cfg.PathLoss != nil {
		m := make(map[uint16]float64, len(cfg.PathLoss))
		for e, p := range cfg.PathLoss {
			m[e] = p
		}
		cfg.PathLoss = m
	}
	cfg.Blackouts = append([]Blackout(nil), cfg.Blackouts...)
	cfg.Holds = append([]Hold(nil), cfg.Holds...)
	if cfg.Bursty != nil {
		l.bursty, l.hasBurst = *cfg.Bursty, true
		cfg.Bursty = &l.bursty
	}
	l.cfg = cfg
	return l
}

// Send hands the link a packet sent from side from at time now on path k.
// The link copies pkt before returning, so the caller keeps ownership of
// its buffer and may reuse it at once. now should not decrease from one
// call to the next (the serializer's FIFO assumes it).
//
// The packet is dropped or scheduled for delivery to from.Other(); Deliver
// hands it over once its time has come. Send draws from the link's random
// source, so the order of Send calls is part of what makes a run repeat.
func (l *Link) Send(now int64, from Side, pkt []byte, k PathKey) {
	if from > B {
		panic(fmt.Sprintf("memlink: Send from invalid %v", from))
	}
	l.stats.Sent++

	// Serialization comes first: the sender's NIC transmits the packet
	// whatever the fabric later does with it.
	txDone := now
	if l.cfg.RateBps > 0 {
		start := max(float64(now), l.busyUntil[from])
		l.busyUntil[from] = start + float64(len(pkt))*8*1e9/l.cfg.RateBps
		txDone = int64(math.Ceil(l.busyUntil[from]))
	}

	for i := range l.cfg.Blackouts {
		if l.cfg.Blackouts[i].covers(now, k) {
			l.stats.DroppedBlackout++
			return
		}
	}
	if l.hasBurst && l.bursty.step(l.rng, &l.bad[from]) {
		l.stats.DroppedBurst++
		return
	}
	if chance(l.rng, l.cfg.PathLoss[k.Entropy]) {
		l.stats.DroppedPath++
		return
	}
	if chance(l.rng, l.cfg.Loss) {
		l.stats.DroppedRandom++
		return
	}

	at := txDone + l.cfg.Delay
	if l.cfg.PathDelay != nil {
		d := l.cfg.PathDelay(k)
		if d < 0 {
			panic(fmt.Sprintf("memlink: PathDelay(%+v) = %d, want >= 0", k, d))
		}
		at += d
	}
	if l.cfg.Jitter > 0 {
		at += l.rng.Int64N(l.cfg.Jitter + 1)
	}
	for i := range l.cfg.Holds {
		if h := &l.cfg.Holds[i]; h.covers(now, k) {
			at += h.Extra
			l.stats.Held++
			break
		}
	}
	if chance(l.rng, l.cfg.Reorder) {
		at += l.cfg.ReorderDelay
		l.stats.Reordered++
	}
	to := from.Other()
	l.schedule(at, to, pkt, k)
	if chance(l.rng, l.cfg.Duplicate) {
		l.stats.Duplicated++
		l.schedule(at, to, pkt, k)
	}
}

// schedule puts a link-owned copy of pkt in flight, corrupting the copy
// with probability Config.Corrupt.
func (l *Link) schedule(at int64, to Side, pkt []byte, k PathKey) {
	buf := l.pool.get(len(pkt))
	copy(buf, pkt)
	if len(buf) > 0 && chance(l.rng, l.cfg.Corrupt) {
		bit := l.rng.IntN(len(buf) * 8)
		buf[bit/8] ^= 1 << (bit % 8)
		l.stats.Corrupted++
	}
	l.inflight.push(flight{at: at, seq: l.seq, buf: buf, key: k, to: to})
	l.seq++
}

// NextDelivery returns when the earliest packet in flight is due; ok is
// false when nothing is in flight.
func (l *Link) NextDelivery() (at int64, ok bool) {
	if l.inflight.len() == 0 {
		return 0, false
	}
	return l.inflight.peek().at, true
}

// InFlight returns the number of packets scheduled but not yet delivered.
func (l *Link) InFlight() int { return l.inflight.len() }

// Deliver calls fn for every packet due at or before now, in order of
// (delivery time, order in which it was scheduled), and returns how many it
// delivered.
//
// pkt belongs to the link and is valid only during the call to fn: fn must
// copy what it keeps. fn may call Send (an endpoint answering at once); a
// packet so sent that is already due (zero delay) is delivered by this same
// call. fn must not call Deliver.
func (l *Link) Deliver(now int64, fn func(to Side, pkt []byte, k PathKey)) int {
	if l.delivering {
		panic("memlink: Deliver called from a Deliver callback")
	}
	l.delivering = true
	defer func() { l.delivering = false }()
	n := 0
	for l.inflight.len() > 0 && l.inflight.peek().at <= now {
		f := l.inflight.pop()
		l.stats.Delivered++
		n++
		fn(f.to, f.buf, f.key)
		l.pool.put(f.buf)
	}
	return n
}

// Stats returns the counters so far.
func (l *Link) Stats() Stats { return l.stats }

// AddBlackout kills a path from b.At on, after the link was built (for
// tests that decide mid-run that a path or the whole link dies).
func (l *Link) AddBlackout(b Blackout) { l.cfg.Blackouts = append(l.cfg.Blackouts, b) }

// AddHold holds a path from h.At on, after the link was built (for tests
// that pick the path to hold from the traffic they see). It panics on a
// negative h.Extra, as New does.
func (l *Link) AddHold(h Hold) {
	if h.Extra < 0 {
		panic(fmt.Sprintf("memlink: AddHold: negative Extra = %d", h.Extra))
	}
	l.cfg.Holds = append(l.cfg.Holds, h)
}
