package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fabric's own tests (sim/fabric) drive it with a scripted transport;
// these run it inside whole experiments.

// A loss rule naming a link the topology lacks fails the run, with an
// error that shows what link names look like.
func TestUnknownLinkNameFailsTheRun(t *testing.T) {
	e, err := Parse("x.yaml", []byte(twoLeaves+"loss: {links: {\"p0:host9-leaf1\": 1}}\nworkload: {kind: long-lived}\n"), nil)
	require.NoError(t, err)
	_, err = e.Execute(Options{})
	require.ErrorContains(t, err, `no link named "p0:host9-leaf1"`)
	require.ErrorContains(t, err, "e.g.")
}

const twoLeaves = `
duration: 2ms
topology: {leaves: 2, hosts_per_leaf: 1, spines: 4}
`

// RoCEv2 on a lossless fabric: the test-sized incast drops nothing, every
// flow completes, pause frames flow; on the same fabric without PFC the
// same run drops at the receiver's port.
func TestPFCIncastRoCEv2(t *testing.T) {
	run := func(pfc bool) Row {
		e, err := Load("../configs/experiments/pfc-incast.yaml", []string{
			"duration=3ms", "warmup=0s", "workload.senders=32", "workload.flow_size=256KiB",
			"sweep.topology.pfc.enabled=[" + map[bool]string{false: "false", true: "true"}[pfc] + "]"})
		require.NoError(t, err)
		res, err := e.Execute(Options{})
		require.NoError(t, err)
		require.Len(t, res.Rows, 1)
		return res.Rows[0]
	}
	num := func(r Row, k string) float64 {
		v, ok := r.Float(k)
		require.True(t, ok, "row lacks %s", k)
		return v
	}
	on := run(true)
	require.Zero(t, num(on, "buffer_drops"))
	require.Zero(t, num(on, "pfc_overflow_drops"))
	require.Zero(t, num(on, "failed_wrs"))
	require.Zero(t, num(on, "unfinished_flows"))
	fin, _ := on.Get("finished")
	require.Equal(t, true, fin)
	require.Greater(t, num(on, "pfc_pauses"), 0.0)
	require.Greater(t, num(on, "pfc_max_paused_us"), 0.0)

	off := run(false)
	require.Greater(t, num(off, "buffer_drops"), 0.0)
	_, has := off.Get("pfc_pauses")
	require.False(t, has, "PFC figures appear only in lossless runs")
}
