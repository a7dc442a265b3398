//go:build dpdk

package dpdkengine

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Phase is one part of a shard loop's time.
type Phase uint8

// The phases of a shard's loop. Every nanosecond the loop runs is in
// exactly one of them, so their sum is the loop's wall time.
const (
	// PhaseRx: the receive bursts and the parsing of their frames
	// (Ethernet, IPv4, UDP, ARP), freeing them after the core (and, with
	// the receive impairment stage, the core's Receive of the frames it
	// held back).
	PhaseRx Phase = iota
	// PhaseCore: the transport core: Receive of each delivered payload,
	// its timers, and NextPacket writing packets into mbufs.
	PhaseCore
	// PhaseTx: the headers in front of the core's packets, neighbour
	// lookups, and the transmit bursts.
	PhaseTx
	// PhaseApp: the application's step on the loop (RunApp) and the
	// commands other goroutines hand in with Do.
	PhaseApp
	// PhaseIdle: iterations that found no work (empty polls included),
	// yields, sleeps, and a held shard's time parked between apps.
	PhaseIdle
	phases
)

var phaseNames = [phases]string{"rx", "core", "tx", "app", "idle"}

func (p Phase) String() string {
	if p < phases {
		return phaseNames[p]
	}
	return "unknown"
}

// TimeSplit is a shard loop's wall time by phase.
type TimeSplit [phases]time.Duration

// Total is the sum of the phases: the time the loop has run.
func (t *TimeSplit) Total() time.Duration {
	var s time.Duration
	for _, d := range t {
		s += d
	}
	return s
}

// stopwatch splits the loop's time with one clock read per phase
// boundary of an iteration (per burst, never per packet). A lap bills the
// time since the previous read to a phase; the laps of one iteration are
// pending until it ends, then go to their phases if it did work, or all
// to idle if it did not: an empty poll is the cost of idling.
type stopwatch struct {
	at    verbs.Time // the last clock read
	fresh bool       // at is the end of the previous iteration: reuse it as the next start
	cur   [phases]verbs.Time
}

// lap reads the clock, bills the time since the last read to p, and
// returns the time read.
func (s *Shard) lap(p Phase) verbs.Time {
	t := s.now()
	s.sw.cur[p] += t - s.sw.at
	s.sw.at = t
	return t
}

// startIteration returns the iteration's start time: the previous
// iteration's last read when nothing ran in between, else a new read,
// whose gap since the last one (a sleep, a yield, publishing, a park) is
// idle.
func (s *Shard) startIteration() verbs.Time {
	if s.sw.fresh {
		s.sw.fresh = false
		return s.sw.at
	}
	t := s.now()
	s.c.Time[PhaseIdle] += time.Duration(t - s.sw.at)
	s.sw.at = t
	return t
}

// endIteration commits the iteration's laps (see stopwatch).
func (s *Shard) endIteration(work bool) {
	for p, d := range s.sw.cur {
		if work {
			s.c.Time[p] += time.Duration(d)
		} else {
			s.c.Time[PhaseIdle] += time.Duration(d)
		}
		s.sw.cur[p] = 0
	}
	s.sw.fresh = true
}

// settleIdle bills the time since the last read to idle: for what the
// loop does between iterations (publishing, parking, the final flush)
// before a reader looks at the counters.
func (s *Shard) settleIdle() {
	t := s.now()
	s.c.Time[PhaseIdle] += time.Duration(t - s.sw.at)
	s.sw.at = t
	s.sw.fresh = false
}
