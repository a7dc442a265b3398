package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Once a run is warm (its packet pool, event heap and the transports'
// pools have grown to the working size), simulating more time allocates
// nothing: event queue, forwarding, host NIC ports, the metaroce core and
// the meter all reuse what they have.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	e, err := Parse("alloc.yaml", []byte(`
duration: 10ms
topology: {leaves: 2, hosts_per_leaf: 2, spines: 2, ecn: {mode: red, kmin: 20KiB, kmax: 200KiB, pmax: 0.2}}
loss: {rate: 0.01, where: all}
workload: {kind: long-lived, pattern: permutation, connections: 8, outstanding: 4}
transports: [metaroce]
`), nil)
	require.NoError(t, err)
	runs, err := e.Runs()
	require.NoError(t, err)
	r := runs[0]
	s, err := newSim(runSpec{cfg: r.cfg, transport: r.tr, params: r.params})
	require.NoError(t, err)
	require.NoError(t, s.start())
	s.runUntil(2e6) // warm up: 2 ms
	before := s.fab.Stats().HostTx
	at := Time(2e6)
	allocs := testing.AllocsPerRun(5, func() {
		at += 100e3
		s.runUntil(at)
	})
	require.Greater(t, s.fab.Stats().HostTx-before, uint64(1000), "the run must be moving packets")
	require.Zero(t, allocs, "allocations per 100 µs of steady-state simulation")
}
