package sim

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Test-sized versions of the experiment files: the same files, cut
// down with --set so that the suite stays fast on two cores.
var smallExperiments = map[string][]string{
	"loss-sweep.yaml": {"duration=1ms", "warmup=300us", "sweep.loss.rate=[0, 0.01, 0.1]"},
	"incast.yaml":     {"duration=400us", "warmup=100us", "sweep.workload.senders=[8, 32]"},
	"plane-failure.yaml": {"duration=1ms", "warmup=100us", "failures.0.at=400us",
		"topology.leaves=2", "workload.connections=8"},
	"plane-scaling.yaml": {"duration=200us", "warmup=100us", "workload.connections=300", "sweep.topology.planes=[1, 2]",
		"topology.leaves=4", "topology.hosts_per_leaf=4", "topology.spines=4"},
	"collectives.yaml": {"workload.size=2MiB", "workload.hosts=8", "duration=20ms"},
	"collectives-channels.yaml": {"workload.size=2MiB", "workload.hosts=8", "duration=20ms", "sweep.workload.channels=[1, 2]",
		"sweep.workload.placement=[spread]"},
	"pfc-incast.yaml": {"duration=400us", "warmup=100us", "sweep.workload.senders=[8, 32]"},
	"ecmp-collision.yaml": {"duration=1ms", "warmup=300us", "sweep.seed=[1]",
		"topology.hosts_per_leaf=8", "topology.fabric_gbps=200", "workload.connections=16"},
	"asymmetry.yaml": {"duration=1500us", "warmup=500us"},
}

func runSmall(t *testing.T, file string, parallel int) *Results {
	t.Helper()
	e, err := Load(filepath.Join("..", "configs", "experiments", file), smallExperiments[file])
	require.NoError(t, err)
	res, err := e.Execute(Options{Parallel: parallel})
	require.NoError(t, err)
	return res
}

func jsonOf(t *testing.T, r *Results) string {
	var b bytes.Buffer
	require.NoError(t, r.WriteJSON(&b))
	return b.String()
}

// The same experiment run twice gives identical JSON, byte for byte,
// whether its runs go one at a time or in parallel.
func TestDeterminism(t *testing.T) {
	for _, file := range []string{"loss-sweep.yaml", "incast.yaml", "plane-failure.yaml", "pfc-incast.yaml"} {
		t.Run(file, func(t *testing.T) {
			a := jsonOf(t, runSmall(t, file, 1))
			b := jsonOf(t, runSmall(t, file, 2))
			require.Equal(t, a, b)
			require.NotEmpty(t, a)
		})
	}
}

// Every experiment file loads, runs at test size and reports the figures
// its issue asks for, with no failed work requests.
func TestExperimentsSmall(t *testing.T) {
	need := map[string][]string{
		"loss-sweep.yaml":           {"goodput_gbps", "link_gbps", "efficiency", "loss.rate", "workload.connections"},
		"incast.yaml":               {"goodput_gbps", "jain", "converge_rtts", "peak_queue_kib", "series"},
		"plane-failure.yaml":        {"before_gbps", "after_gbps", "recover_rtts", "failed_wrs", "series"},
		"plane-scaling.yaml":        {"goodput_gbps", "topology.planes", "connections"},
		"collectives.yaml":          {"completion_us", "algbw_gbps", "busbw_gbps", "workload.kind"},
		"collectives-channels.yaml": {"completion_us", "busbw_gbps", "workload.channels", "channels"},
		"pfc-incast.yaml":           {"goodput_gbps", "jain", "peak_queue_kib", "buffer_drops", "topology.pfc.enabled"},
		"ecmp-collision.yaml":       {"goodput_gbps", "efficiency", "seed"},
		"asymmetry.yaml":            {"goodput_gbps", "efficiency", "topology.link_gbps", "loss.links"},
	}
	// Rows at test size: 2 transports x the swept combinations (pfc-incast
	// runs RoCEv2 alone, over 2 sender counts x PFC off and on).
	rows := map[string]int{
		"loss-sweep.yaml": 12, "incast.yaml": 4, "plane-failure.yaml": 2, "plane-scaling.yaml": 4,
		"collectives.yaml": 16, "collectives-channels.yaml": 16, "pfc-incast.yaml": 4,
		"ecmp-collision.yaml": 2, "asymmetry.yaml": 8,
	}
	require.Len(t, need, len(smallExperiments), "every test-sized experiment is checked")
	for file, keys := range need {
		t.Run(file, func(t *testing.T) {
			res := runSmall(t, file, 0)
			require.Len(t, res.Rows, rows[file])
			for _, row := range res.Rows {
				for _, k := range keys {
					_, ok := row.Get(k)
					require.True(t, ok, "row lacks %s: %v", k, row)
				}
				for _, k := range []string{"experiment", "transport", "goodput_gbps", "link_gbps", "efficiency"} {
					_, ok := row.Get(k)
					require.True(t, ok, "row lacks %s", k)
				}
				require.Zero(t, mustFloat(t, row, "failed_wrs"), "failed work requests in %v", row)
			}
		})
	}
}

// Loss sweep: efficiency is relative to the lossless run of the same
// transport and connection count, so it is exactly 1 at loss 0 and falls
// with loss.
func TestLossSweepBaseline(t *testing.T) {
	res := runSmall(t, "loss-sweep.yaml", 0)
	require.Len(t, res.Rows, 12, "2 transports x 2 connection counts x 3 loss rates")
	lossless := 0
	for _, row := range res.Rows {
		loss := mustFloat(t, row, "loss.rate")
		eff := mustFloat(t, row, "efficiency")
		require.Positive(t, mustFloat(t, row, "baseline_gbps"), "%v", row)
		if loss == 0 {
			require.Equal(t, 1.0, eff)
			lossless++
		} else {
			require.Less(t, eff, 1.0, "%v", row)
		}
	}
	require.Equal(t, 4, lossless, "one lossless baseline per transport and connection count")
	// The claim under test, useful bandwidth even at 10% loss, with the
	// thresholds of the design: TestLossEfficiencyTargets.
}

// Collectives: nccl-tests' formulas.
func TestCollectiveFigures(t *testing.T) {
	res := runSmall(t, "collectives.yaml", 0)
	// 2 transports x 2 kinds x 2 placements x PFC off and on.
	require.Len(t, res.Rows, 16)
	kinds := map[any]int{}
	for _, row := range res.Rows {
		kind, _ := row.Get("workload.kind")
		kinds[kind]++
		alg := mustFloat(t, row, "algbw_gbps")
		bus := mustFloat(t, row, "busbw_gbps")
		tus := mustFloat(t, row, "completion_us")
		n := mustFloat(t, row, "ranks")
		require.Equal(t, 8.0, n)
		size := mustFloat(t, row, "size_bytes")
		require.InDelta(t, size*8/(tus*1e3), alg, alg*1e-9)
		if kind == "allreduce" {
			require.InDelta(t, alg*2*(n-1)/n, bus, 1e-9)
		} else {
			require.InDelta(t, alg*(n-1)/n, bus, 1e-9)
		}
		require.Greater(t, bus, 10.0)
		require.LessOrEqual(t, bus, 100.0)
		fin, _ := row.Get("finished")
		require.Equal(t, true, fin)
	}
	require.Equal(t, map[any]int{"allreduce": 8, "all-to-all": 8}, kinds)
}

// Channels: every rank pair has one connection per channel, and each
// message is split over them as evenly as bytes allow (125000 bytes over
// three channels: 41667, 41667, 41666); an all-reduce's channels each run
// all 2(n-1) steps, and every message arrives.
func TestCollectiveChannels(t *testing.T) {
	for _, kind := range []string{"allreduce", "all-to-all"} {
		e, err := Load("../configs/experiments/collectives.yaml", []string{"workload.hosts=8", "workload.size=1000000",
			"workload.channels=3", "duration=20ms", "sweep.workload.kind=[" + kind + "]", "sweep.workload.placement=[spread]",
			"sweep.topology.pfc.enabled=[false]", "workload.warmup_iters=0", "workload.iters=1"})
		require.NoError(t, err)
		runRecorded(t, e, func(r *Run, rec *recording) {
			want, msgs := 8*7*3, 1 // all-to-all: a connection per ordered pair and channel
			if kind == "allreduce" {
				want, msgs = 8*3, 14
			}
			require.Len(t, rec.posted, want, "%s %s: connections", r.Transport, kind)
			sizes := map[int]int{}
			for c, ids := range rec.posted {
				require.Len(t, ids, msgs, "%s %s conn %d", r.Transport, kind, c)
				require.ElementsMatch(t, ids, rec.got[c], "%s %s conn %d: every message arrives", r.Transport, kind, c)
				for _, n := range rec.bytes[c] {
					sizes[n]++
				}
			}
			require.Equal(t, map[int]int{41667: 2 * want / 3 * msgs, 41666: want / 3 * msgs}, sizes, "%s %s", r.Transport, kind)
		})
	}
}

// Plane failure: the transport keeps working and no work request fails.
func TestPlaneFailureNoFailedWork(t *testing.T) {
	res := runSmall(t, "plane-failure.yaml", 0)
	require.Len(t, res.Rows, 2, "one row per transport")
	for _, row := range res.Rows {
		require.Greater(t, mustFloat(t, row, "before_gbps"), 0.0)
		require.Greater(t, mustFloat(t, row, "after_gbps"), 0.0)
	}
	m := rowsOf(res, "metaroce")
	require.Len(t, m, 1)
	require.Greater(t, mustFloat(t, m[0], "path_failures"), 0.0, "the failed plane's paths should be judged failed")
	require.Zero(t, mustFloat(t, m[0], "failed_wrs"), "metaroce moves the failed plane's work to the others")
	require.Zero(t, mustFloat(t, m[0], "stalled_connections"))
}

// A bad transport parameter is an error when the file is loaded, naming
// the key, not when its run starts.
func TestTransportParamsCheckedAtLoad(t *testing.T) {
	_, err := Load(filepath.Join("..", "configs", "experiments", "incast.yaml"), []string{"transport.metaroce.hint_utilization=1.5"})
	require.ErrorContains(t, err, "transport.metaroce.hint_utilization")
	_, err = Load(filepath.Join("..", "configs", "experiments", "incast.yaml"), []string{"transport.metaroce.hint_utilization=0.9"})
	require.NoError(t, err)
}
