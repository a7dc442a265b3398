package fabric

import (
	"fmt"
	"math/rand/v2"

	"github.com/metaroce/metaroce/sim/units"
)

// ECNConfig is a switch port's marking policy for ECN-capable packets:
//
//	mode none: never mark.
//	mode step: DCTCP-style; mark when the queue ahead of the packet exceeds K.
//	mode red:  RED-like on the instantaneous queue q ahead of the packet:
//	           q <= Kmin never, Kmin < q < Kmax with probability
//	           Pmax·(q−Kmin)/(Kmax−Kmin), q >= Kmax always (as DCQCN switches do).
//
// Packets that are not ECN-capable are never marked; when the buffer is
// full they are dropped like any other.
type ECNConfig struct {
	Mode string     `yaml:"mode"`
	K    units.Size `yaml:"k"`
	Kmin units.Size `yaml:"kmin"`
	Kmax units.Size `yaml:"kmax"`
	Pmax float64    `yaml:"pmax"`
}

func (e *ECNConfig) Validate() error {
	switch e.Mode {
	case "", "none":
		e.Mode = "none"
	case "step":
		if e.K <= 0 {
			return fmt.Errorf("topology.ecn.k = %d, want > 0 for mode step", e.K)
		}
	case "red":
		if e.Kmin < 0 || e.Kmax <= e.Kmin {
			return fmt.Errorf("topology.ecn: want 0 <= kmin < kmax, have kmin %d kmax %d", e.Kmin, e.Kmax)
		}
		if !(e.Pmax > 0 && e.Pmax <= 1) {
			return fmt.Errorf("topology.ecn.pmax = %v, want (0, 1]", e.Pmax)
		}
	default:
		return fmt.Errorf("topology.ecn.mode = %q, want none, step or red", e.Mode)
	}
	return nil
}

// marker decides marks for one port. The RED draw uses the port's own
// random source, so marking on one port never perturbs another.
type marker struct {
	mode         uint8 // 0 none, 1 step, 2 red
	k, lo, hi    int64
	pmax         float64
	rng          *rand.Rand
	seedA, seedB uint64
}

func newMarker(c *ECNConfig, seedA, seedB uint64) marker {
	m := marker{k: int64(c.K), lo: int64(c.Kmin), hi: int64(c.Kmax), pmax: c.Pmax, seedA: seedA, seedB: seedB}
	switch c.Mode {
	case "step":
		m.mode = 1
	case "red":
		m.mode = 2
	}
	return m
}

// mark reports whether a packet that finds q bytes queued ahead of it is
// marked Congestion Experienced.
func (m *marker) mark(q int64) bool {
	switch m.mode {
	case 1:
		return q > m.k
	case 2:
		if q <= m.lo {
			return false
		}
		if q >= m.hi {
			return true
		}
		if m.rng == nil {
			m.rng = newRand(m.seedA, m.seedB)
		}
		return m.rng.Float64() < m.pmax*float64(q-m.lo)/float64(m.hi-m.lo)
	}
	return false
}
