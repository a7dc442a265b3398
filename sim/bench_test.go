package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// benchRun runs one experiment text once and returns its Sim.
func benchSim(b *testing.B, yaml string) *Sim {
	e, err := Parse("bench.yaml", []byte(yaml), nil)
	require.NoError(b, err)
	runs, err := e.Runs()
	require.NoError(b, err)
	r := runs[0]
	s, err := newSim(runSpec{cfg: r.cfg, transport: r.tr, params: r.params})
	require.NoError(b, err)
	_, err = s.run()
	require.NoError(b, err)
	return s
}

// BenchmarkSim measures the simulator's speed: simulated packets (every
// packet a host sends, data and control, each crossing up to four links)
// per wall-clock second, on a 16-host leaf-spine with 1% loss and 64
// connections, metaroce as the transport. The figure is reported as
// pkts/s (and events/s); ns/op is one 500 µs run.
func BenchmarkSim(b *testing.B) {
	const exp = `
duration: 500us
topology: {leaves: 4, hosts_per_leaf: 4, spines: 4, ecn: {mode: step, k: 100KiB}}
loss: {rate: 0.01}
workload: {kind: long-lived, pattern: permutation, connections: 64, outstanding: 4}
transports: [metaroce]
`
	var pkts, events uint64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s := benchSim(b, exp)
		pkts += s.fab.Stats().HostTx
		events += s.events
	}
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "pkts/s")
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSimPlaneScaling is the heaviest point of plane-scaling.yaml
// (8 planes, 64 hosts, 4,000 connections), shortened to 200 µs.
func BenchmarkSimPlaneScaling(b *testing.B) {
	const exp = `
duration: 200us
topology: {kind: multi-plane, planes: 8, leaves: 8, hosts_per_leaf: 8, spines: 8, ecn: {mode: red, kmin: 100KiB, kmax: 400KiB, pmax: 0.2}}
transport: {metaroce: {paths: 16}}
workload: {kind: long-lived, pattern: permutation, connections: 4000, outstanding: 2}
transports: [metaroce]
`
	var pkts uint64
	for i := 0; i < b.N; i++ {
		s := benchSim(b, exp)
		pkts += s.fab.Stats().HostTx
	}
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "pkts/s")
}
