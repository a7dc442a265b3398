package fabric

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// LossConfig is the random and bursty loss of the fabric's links. Loss
// applies per link crossing, in both directions of every link in scope,
// and is decided when a packet reaches the far end of the link (it did
// occupy the wire).
type LossConfig struct {
	// Rate is the probability that a packet crossing a link in scope is
	// lost, independently of every other packet.
	Rate float64 `yaml:"rate"`
	// Where selects the links in scope: all; host-links (every link with a
	// host at one end); host-up (host to switch); host-down (switch to host:
	// every packet crosses exactly one, so Rate is then the end-to-end loss
	// rate of data and acknowledgements alike); fabric (switch to switch).
	// In back-to-back topologies the one host-to-host link counts as every
	// kind. Default host-down.
	Where string `yaml:"where"`
	// Bursty adds Gilbert-Elliott loss on the links in scope.
	Bursty *BurstyConfig `yaml:"bursty"`
	// Links sets a random loss rate on individual links by name (both
	// directions), on top of the above; see docs/sim.md for link names.
	Links map[string]float64 `yaml:"links"`
}

// BurstyConfig is a two-state (Gilbert-Elliott) loss model. Before each
// packet a link direction moves good→bad with probability PGoodBad or
// bad→good with PBadGood, then loses the packet with its state's loss
// probability. With LossGood 0 and LossBad 1 losses come in bursts of mean
// length 1/PBadGood and the long-run rate is PGoodBad/(PGoodBad+PBadGood).
type BurstyConfig struct {
	PGoodBad float64 `yaml:"p_good_bad"`
	PBadGood float64 `yaml:"p_bad_good"`
	LossGood float64 `yaml:"loss_good"`
	LossBad  float64 `yaml:"loss_bad"`
}

func (l *LossConfig) Validate() error {
	switch l.Where {
	case "":
		l.Where = "host-down"
	case "all", "host-links", "host-up", "host-down", "fabric":
	default:
		return fmt.Errorf("loss.where = %q, want all, host-links, host-up, host-down or fabric", l.Where)
	}
	check := func(name string, p float64) error {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("%s = %v, want a probability in [0, 1]", name, p)
		}
		return nil
	}
	if err := check("loss.rate", l.Rate); err != nil {
		return err
	}
	if b := l.Bursty; b != nil {
		for _, p := range []struct {
			n string
			v float64
		}{{"p_good_bad", b.PGoodBad}, {"p_bad_good", b.PBadGood}, {"loss_good", b.LossGood}, {"loss_bad", b.LossBad}} {
			if err := check("loss.bursty."+p.n, p.v); err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(l.Links))
	for n := range l.Links {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := check("loss.links."+n, l.Links[n]); err != nil {
			return err
		}
	}
	return nil
}

// inScope reports whether loss applies to a link of class c.
func (l *LossConfig) inScope(c linkClass) bool {
	switch l.Where {
	case "all":
		return true
	case "host-links":
		return c != linkFabric
	case "host-up":
		return c == linkHostUp || c == linkDirect
	case "host-down":
		return c == linkHostDown || c == linkDirect
	case "fabric":
		return c == linkFabric || c == linkDirect
	}
	return false
}

// lossState is one link direction's loss process. Its random source is
// its own (seeded from the run seed and the link index), so loss on one
// link does not depend on traffic elsewhere, and the loss pattern of a
// link is the same whatever the ECN or buffer settings.
type lossState struct {
	rate   float64
	bursty *BurstyConfig
	bad    bool
	rng    *rand.Rand
}

func chance(r *rand.Rand, p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	return r.Float64() < p
}

// lose decides the fate of one packet crossing the link.
func (s *lossState) lose() bool {
	if s.rng == nil {
		return false
	}
	if b := s.bursty; b != nil {
		if s.bad {
			if chance(s.rng, b.PBadGood) {
				s.bad = false
			}
		} else if chance(s.rng, b.PGoodBad) {
			s.bad = true
		}
		p := b.LossGood
		if s.bad {
			p = b.LossBad
		}
		if chance(s.rng, p) {
			return true
		}
	}
	return chance(s.rng, s.rate)
}
