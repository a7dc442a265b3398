package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Regression tests for congestion control and path intelligence: each
// runs a small version of its experiment (the full ones are in `make
// experiments`) and checks metaroce against the figure the design asks
// for, with RoCEv2 run beside it on the same fabric. The thresholds are
// those of the full experiments; the small versions are sized so that they
// hold with margin, and break when a mechanism does.

// rowsOf returns the rows of transport tr.
func rowsOf(res *Results, tr string) []Row {
	var out []Row
	for _, r := range res.Rows {
		if v, _ := r.Get("transport"); v == tr {
			out = append(out, r)
		}
	}
	return out
}

func mustFloat(t *testing.T, r Row, key string) float64 {
	t.Helper()
	v, ok := r.Float(key)
	require.True(t, ok, "row lacks %s (or it is empty): %v", key, r)
	return v
}

// Incast: the receiver's link stays busy, the senders share it fairly from
// the third base RTT on, and once converged the queue at the receiver's
// port stays within about one BDP.
func TestIncastFairAndDrained(t *testing.T) {
	e, err := Load("../configs/experiments/incast.yaml", []string{"duration=1ms", "warmup=300us", "sweep.workload.senders=[32, 128]"})
	require.NoError(t, err)
	res, err := e.Execute(Options{})
	require.NoError(t, err)
	rows := rowsOf(res, "metaroce")
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.GreaterOrEqual(t, mustFloat(t, r, "efficiency"), 0.9, "%v", r)
		require.GreaterOrEqual(t, mustFloat(t, r, "goodput_from3_gbps"), 90.0, "%v", r)
		require.GreaterOrEqual(t, mustFloat(t, r, "jain_from3"), 0.95, "%v", r)
		conv := mustFloat(t, r, "converge_rtts")
		require.Less(t, conv, 60.0, "%v", r)
		bdp := mustFloat(t, r, "bdp_kib")
		require.LessOrEqual(t, mustFloat(t, r, "queue_after_kib"), bdp, "%v", r)
		require.Zero(t, mustFloat(t, r, "failed_wrs"))
	}
}

// Plane failure: goodput is back to 70% of the rate before within 10 base
// RTTs, and no work request fails.
func TestPlaneFailureRecovers(t *testing.T) {
	res := runSmall(t, "plane-failure.yaml", 0)
	r := rowsOf(res, "metaroce")[0]
	require.LessOrEqual(t, mustFloat(t, r, "recover70_rtts"), 10.0)
	require.Zero(t, mustFloat(t, r, "failed_wrs"))
	require.Zero(t, mustFloat(t, r, "stalled_connections"))
}

// ECMP collisions: spraying reaches 90% of the bisection; RoCEv2's pinned
// flows collide and fall short of metaroce.
func TestECMPCollisionsSprayed(t *testing.T) {
	res := runSmall(t, "ecmp-collision.yaml", 0)
	m := mustFloat(t, rowsOf(res, "metaroce")[0], "efficiency")
	r := mustFloat(t, rowsOf(res, "rocev2")[0], "efficiency")
	require.GreaterOrEqual(t, m, 0.9)
	require.Greater(t, m, r)
}

// Asymmetry: with one of 32 paths 10x slower, dropping half its packets,
// or both, the connection keeps 90% of what the other 31 paths carry.
func TestAsymmetryOnePathBad(t *testing.T) {
	res := runSmall(t, "asymmetry.yaml", 0)
	rows := rowsOf(res, "metaroce")
	require.Len(t, rows, 4)
	for _, r := range rows {
		require.GreaterOrEqual(t, mustFloat(t, r, "efficiency"), 0.9*31/32, "%v", r)
		require.Zero(t, mustFloat(t, r, "failed_wrs"))
	}
}

// lossTargets are loss-sweep.yaml's targets (docs/congestion.md):
// metaroce's goodput relative to lossless at 1% and at 10% loss.
var lossTargets = []struct{ loss, minEfficiency float64 }{{0.01, 0.95}, {0.1, 0.80}}

// rowsAt returns the rows whose key is v (within rounding of the
// decimal written in the experiment file).
func rowsAt(t *testing.T, rows []Row, key string, v float64) []Row {
	t.Helper()
	var out []Row
	for _, r := range rows {
		if math.Abs(mustFloat(t, r, key)-v) < 1e-12 {
			out = append(out, r)
		}
	}
	return out
}

// Loss: at least 0.95 of lossless goodput at 1% loss and 0.80 at 10%,
// with 1 connection and with 16 (the small sweep has both).
func TestLossEfficiencyTargets(t *testing.T) {
	res := runSmall(t, "loss-sweep.yaml", 0)
	rows := rowsOf(res, "metaroce")
	require.Len(t, rows, 6, "2 connection counts x 3 loss rates")
	for _, tg := range lossTargets {
		at := rowsAt(t, rows, "loss.rate", tg.loss)
		require.Len(t, at, 2, "rows at loss %v", tg.loss)
		for _, r := range at {
			require.GreaterOrEqual(t, mustFloat(t, r, "efficiency"), tg.minEfficiency, "%v", r)
		}
	}
}

// Plane scaling: k planes carry at least 0.95·k times one plane.
func TestPlaneScalingLinear(t *testing.T) {
	res := runSmall(t, "plane-scaling.yaml", 0)
	by := map[float64]float64{}
	for _, r := range rowsOf(res, "metaroce") {
		by[mustFloat(t, r, "topology.planes")] = mustFloat(t, r, "goodput_gbps")
	}
	require.Contains(t, by, 1.0)
	require.Contains(t, by, 2.0)
	require.GreaterOrEqual(t, by[2], 0.95*2*by[1])
}

// Plane failure and return: once the plane is back, the failed paths are
// re-probed, restored and used again, and goodput returns to what four
// planes carry.
func TestPlaneReturnsAfterFailure(t *testing.T) {
	sets := append([]string{}, smallExperiments["plane-failure.yaml"]...)
	sets = append(sets, "duration=3ms", "failures.0.recover=1200us", "transports=[metaroce]")
	e, err := Load("../configs/experiments/plane-failure.yaml", sets)
	require.NoError(t, err)
	res, err := e.Execute(Options{})
	require.NoError(t, err)
	r := rowsOf(res, "metaroce")[0]
	before := mustFloat(t, r, "before_gbps")
	require.GreaterOrEqual(t, mustFloat(t, r, "recovered_gbps"), 0.9*before)
	require.Greater(t, mustFloat(t, r, "path_restores"), 0.0)
	require.Zero(t, mustFloat(t, r, "failed_wrs"))
}

// Collectives: metaroce's all-reduce with ranks spread over the leaves
// (every ring hop crosses the spines) and its all-to-all, ranks packed or
// spread, complete before RoCEv2's, whose single-path flows collide on the
// spines: on the lossy fabric, and on the lossless one RoCEv2 is deployed
// with (PFC). 16 ranks of 8 MiB (collectives.yaml has 64 MiB): RoCEv2
// collides at this size too. A RoCEv2 run that did not finish (retries
// exhausted on the lossy fabric) counts as slower. The packed all-reduce,
// where no two flows share a link, is not compared: there RoCEv2's smaller
// per-packet headers make it the faster (docs/congestion.md).
func TestCollectivesFasterThanRoCEv2(t *testing.T) {
	e, err := Load("../configs/experiments/collectives.yaml", []string{"workload.size=8MiB", "duration=20ms"})
	require.NoError(t, err)
	res, err := e.Execute(Options{})
	require.NoError(t, err)
	type key struct{ kind, place, pfc string }
	done := map[key]map[string]float64{}
	for _, r := range res.Rows {
		kind, _ := r.Get("workload.kind")
		place, _ := r.Get("workload.placement")
		pfc, _ := r.Get("topology.pfc.enabled")
		tr, _ := r.Get("transport")
		k := key{fmt.Sprint(kind), fmt.Sprint(place), fmt.Sprint(pfc)}
		if done[k] == nil {
			done[k] = map[string]float64{}
		}
		v, ok := r.Float("completion_us")
		if !ok {
			require.Equal(t, "rocev2", tr, "metaroce did not finish: %v", r)
			v = math.Inf(1)
		}
		done[k][fmt.Sprint(tr)] = v
	}
	compared := 0
	for k, d := range done {
		if k.kind == "allreduce" && k.place == "packed" {
			continue
		}
		require.Contains(t, d, "metaroce", "%+v", k)
		require.Contains(t, d, "rocev2", "%+v", k)
		require.Less(t, d["metaroce"], d["rocev2"], "%+v", k)
		t.Logf("%+v: metaroce %.0f us, rocev2 %.0f us", k, d["metaroce"], d["rocev2"])
		compared++
	}
	require.Equal(t, 6, compared)
}
