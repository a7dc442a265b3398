package memlink

import (
	"fmt"
	"math/rand/v2"
)

// GilbertElliott is a two-state Markov loss model for bursty loss. The
// channel is either good or bad; before each packet it moves good→bad with
// probability PGoodToBad or bad→good with PBadToGood, then drops the packet
// with the loss probability of the state it is in. With LossGood=0 and
// LossBad=1 losses come in bursts whose length is geometric with mean
// 1/PBadToGood packets, and the long-run loss rate is
// PGoodToBad/(PGoodToBad+PBadToGood).
//
// Each direction of the link has its own state, starting good, and it
// advances once per packet sent in that direction that was not blacked out.
type GilbertElliott struct {
	PGoodToBad float64
	PBadToGood float64
	LossGood   float64
	LossBad    float64
}

func (g *GilbertElliott) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"PGoodToBad", g.PGoodToBad}, {"PBadToGood", g.PBadToGood},
		{"LossGood", g.LossGood}, {"LossBad", g.LossBad},
	} {
		if !isProb(p.v) {
			return fmt.Errorf("probability Bursty.%s = %v, want one in [0,1]", p.name, p.v)
		}
	}
	return nil
}

// step advances the state of one direction (bad reports whether it is in
// the bad state) and reports whether the current packet is lost.
func (g *GilbertElliott) step(r *rand.Rand, bad *bool) bool {
	if *bad {
		if chance(r, g.PBadToGood) {
			*bad = false
		}
	} else if chance(r, g.PGoodToBad) {
		*bad = true
	}
	if *bad {
		return chance(r, g.LossBad)
	}
	return chance(r, g.LossGood)
}

// Blackout models a path that dies at time At: from At on (inclusive),
// every packet sent on it, in either direction, is dropped; before At the
// blackout has no effect. With Until > At the path comes back at Until
// (exclusive): a link that flaps; Until <= At means it never does. The
// path is Entropy on Plane, or Entropy on every plane when AnyPlane is set.
type Blackout struct {
	Entropy  uint16
	Plane    uint8
	AnyPlane bool
	At       int64
	Until    int64
}

// covers reports whether b drops a packet sent at now on path k.
func (b *Blackout) covers(now int64, k PathKey) bool {
	return now >= b.At && (b.Until <= b.At || now < b.Until) &&
		k.Entropy == b.Entropy && (b.AnyPlane || k.Plane == b.Plane)
}

// Hold models a path that parks its packets for a while (a paused switch
// queue, a detour through a slow link): every packet sent on it from At
// (inclusive) until Until (exclusive), in either direction, arrives Extra
// ns later than it otherwise would. Packets it holds are late, not lost:
// a sender that times out and resends them elsewhere has copies of them
// still in flight, which is what tests of exactly-once placement need.
// The path is Entropy on Plane, or Entropy on every plane when AnyPlane
// is set.
type Hold struct {
	Entropy  uint16
	Plane    uint8
	AnyPlane bool
	At       int64
	Until    int64
	Extra    int64
}

// covers reports whether h holds a packet sent at now on path k.
func (h *Hold) covers(now int64, k PathKey) bool {
	return now >= h.At && now < h.Until && k.Entropy == h.Entropy && (h.AnyPlane || k.Plane == h.Plane)
}

// chance reports whether an event of probability p happens. Probabilities
// 0 and 1 are decided without drawing, so an impairment that is off (or
// certain) consumes no random numbers; since the Config is fixed for the
// life of a Link, the sequence of draws still depends only on the sequence
// of calls.
func chance(r *rand.Rand, p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	return r.Float64() < p
}

func isProb(p float64) bool { return p >= 0 && p <= 1 } // false for NaN
