//go:build dpdk

package dpdkengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/verbs"
)

// TestTimeSplitSumsToWallTime runs a real memif transfer and reads each
// shard's time split before and after it, together with the shard's own
// clock: the phases grow by the loop's wall time (within the iteration in
// progress at each reading), and every phase has some of it. Both shards
// receive, run the core, transmit, run Do's commands (the test's
// application) and idle in between.
func TestTimeSplitSumsToWallTime(t *testing.T) {
	p := newMemifPair(t, 14, Impairment{}, 1, 1024)
	type reading struct {
		now verbs.Time
		c   Counters
	}
	read := func(i int) reading {
		var r reading
		require.NoError(t, p.sh[i].Do(func(now verbs.Time) { r = reading{now, p.sh[i].c} }))
		return r
	}
	before := [2]reading{read(0), read(1)}
	p.transfer(xfer{writeN: 2 << 20, sendN: 256 << 10, sendMsgs: 4, readN: 1 << 20}, 7)
	for i := range 2 {
		after := read(i)
		wall := time.Duration(after.now - before[i].now)
		var split TimeSplit
		for ph := range split {
			split[ph] = after.c.Time[ph] - before[i].c.Time[ph]
		}
		t.Logf("shard %d: wall %v, split %v (rx %v core %v tx %v app %v idle %v), %d loops",
			i, wall, split.Total(), split[PhaseRx], split[PhaseCore], split[PhaseTx], split[PhaseApp], split[PhaseIdle],
			after.c.Loops-before[i].c.Loops)
		require.Greater(t, wall, time.Millisecond, "the transfer took time")
		// Each reading misses the laps of the iteration it runs in (the
		// receive bursts before Do's commands): a few microseconds, a
		// slow iteration on a loaded machine maybe a millisecond.
		tol := max(wall/100, 2*time.Millisecond)
		require.InDelta(t, float64(wall), float64(split.Total()), float64(tol), "shard %d: the phases sum to the wall time", i)
		for ph, d := range split {
			require.Positive(t, d, "shard %d: no %s time", i, Phase(ph))
		}
	}
	// The same split reaches engine.Stats (Prometheus reads it there).
	st := p.sh[0].Stats()
	require.True(t, st.Loop.Measured)
	require.Positive(t, st.Loop.Core)
}
