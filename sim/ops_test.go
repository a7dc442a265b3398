package sim

import (
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// recordingTransport wraps a real transport and records, per connection,
// the operation and id of every message posted and the id of every
// arrival (Recv completion).
type recordingTransport struct {
	Transport
	rec *recording
}

type recording struct {
	ops         map[ConnRef][]Op
	posted, got map[ConnRef][]uint32
	bytes       map[ConnRef][]int // size of each message posted
}

func newRecording(t Transport) recordingTransport {
	return recordingTransport{t, &recording{map[ConnRef][]Op{}, map[ConnRef][]uint32{}, map[ConnRef][]uint32{}, map[ConnRef][]int{}}}
}

func (r recordingTransport) NewWorld(env WorldEnv, params any) (World, error) {
	w, err := r.Transport.NewWorld(env, params)
	return recordingWorld{w, r.rec}, err
}

type recordingWorld struct {
	World
	rec *recording
}

func (w recordingWorld) Post(now verbs.Time, c ConnRef, op Op, n int, id uint32) error {
	w.rec.ops[c] = append(w.rec.ops[c], op)
	w.rec.posted[c] = append(w.rec.posted[c], id)
	w.rec.bytes[c] = append(w.rec.bytes[c], n)
	return w.World.Post(now, c, op, n, id)
}

func (w recordingWorld) Poll(now verbs.Time, h int, sink func(Completion)) {
	w.World.Poll(now, h, func(c Completion) {
		if c.Recv {
			w.rec.got[c.Conn] = append(w.rec.got[c.Conn], c.ID)
		}
		sink(c)
	})
}

// runRecorded runs every run of e with its transport wrapped.
func runRecorded(t *testing.T, e *Experiment, each func(r *Run, rec *recording)) {
	t.Helper()
	runs, err := e.Runs()
	require.NoError(t, err)
	for _, r := range runs {
		rec := newRecording(r.tr)
		s, err := newSim(runSpec{cfg: r.cfg, transport: rec, params: r.params})
		require.NoError(t, err)
		_, err = s.run()
		require.NoError(t, err)
		each(r, rec.rec)
	}
}

const opsExperiment = `
experiment: ops
seed: 3
duration: 2ms
topology: {kind: leaf-spine, leaves: 2, spines: 2, ecn: {mode: red, kmin: 20KiB, kmax: 80KiB, pmax: 0.2}}
loss: {rate: 0.01}
transport: {mtu: 1024}
workload: {kind: long-lived, connections: 3, outstanding: 4, message_size: 5KiB, flow_size: 400KiB}
`

// The k-th message on connection c uses ops[(c+k) mod len(ops)].
func TestOpsRotation(t *testing.T) {
	e, err := Parse("ops.yaml", []byte(opsExperiment), []string{"workload.ops=[write, send, read]", "loss.rate=0"})
	require.NoError(t, err)
	runRecorded(t, e, func(r *Run, rec *recording) {
		want := []Op{OpWrite, OpSend, OpRead}
		require.Len(t, rec.ops, 3)
		for c, ops := range rec.ops {
			require.Len(t, ops, 80, "%s conn %d: 400 KiB in 5 KiB messages", r.Transport, c)
			for k, op := range ops {
				require.Equal(t, want[(int(c)+k)%3], op, "%s conn %d message %d", r.Transport, c, k)
			}
		}
	})
}

// Allreduce relies on each arrival's id (the step). Plain SENDs carry no
// immediate, so the adapters recover it from the order of the posts;
// WRITEs and READs report their arrival from the sender's completion.
// Every message arrives once, with its id; with one kind of operation in
// posting order (a WRITE's arrival, reported when its ACK is polled, may
// come after a later SEND's receive completion).
func TestOpsArrivalIDs(t *testing.T) {
	for _, ops := range []string{"[send]", "[send, write_imm, send_imm, write, read]"} {
		e, err := Load("../configs/experiments/collectives.yaml", append(append([]string{}, smallExperiments["collectives.yaml"]...),
			"workload.ops="+ops, "sweep.workload.kind=[allreduce]", "workload.warmup_iters=0", "workload.iters=1"))
		require.NoError(t, err)
		runRecorded(t, e, func(r *Run, rec *recording) {
			require.Len(t, rec.posted, 8)
			for c, ids := range rec.posted {
				require.Len(t, ids, 14, "%s conn %d: 2(n-1) steps", r.Transport, c)
				if ops == "[send]" {
					require.Equal(t, ids, rec.got[c], "%s %s conn %d: arrivals", ops, r.Transport, c)
				} else {
					require.ElementsMatch(t, ids, rec.got[c], "%s %s conn %d: arrivals", ops, r.Transport, c)
				}
			}
		})
	}
}

// Every operation, alone and mixed, moves every flow's bytes on both
// transports under loss and ECN, with no failed work request, and gives
// the same result twice.
func TestOpsEveryOperation(t *testing.T) {
	for _, ops := range []string{"[write_imm]", "[write]", "[send]", "[send_imm]", "[read]", "[write, write_imm, send, send_imm, read]"} {
		t.Run(ops, func(t *testing.T) {
			run := func() *Results {
				e, err := Parse("ops.yaml", []byte(opsExperiment), []string{"workload.ops=" + ops})
				require.NoError(t, err)
				res, err := e.Execute(Options{Parallel: 1})
				require.NoError(t, err)
				return res
			}
			res := run()
			require.Len(t, res.Rows, 2)
			for _, row := range res.Rows {
				tr, _ := row.Get("transport")
				fin, _ := row.Get("finished")
				require.Equal(t, true, fin, "%s: flows unfinished: %v", tr, row)
				require.Zero(t, mustFloat(t, row, "failed_wrs"), "%s: %v", tr, row)
				require.Greater(t, mustFloat(t, row, "goodput_gbps"), 1.0, "%s: %v", tr, row)
				require.Positive(t, mustFloat(t, row, "loss_drops"), "%s: the run should see loss", tr)
			}
			require.Equal(t, jsonOf(t, res), jsonOf(t, run()))
		})
	}
}

// Allreduce relies on each receive completion's id (the step): plain
// SENDs carry no immediate, so the adapters recover it from the order of
// the posts. Every op mix completes the collective.
func TestOpsCollective(t *testing.T) {
	for _, ops := range []string{"[send]", "[write]", "[read]", "[send, write_imm, send_imm, write, read]"} {
		e, err := Load("../configs/experiments/collectives.yaml", append(append([]string{}, smallExperiments["collectives.yaml"]...),
			"workload.ops="+ops, "sweep.workload.kind=[allreduce, all-to-all]"))
		require.NoError(t, err)
		res, err := e.Execute(Options{})
		require.NoError(t, err)
		// 2 transports x 2 kinds x 2 placements x PFC off and on.
		require.Len(t, res.Rows, 16, "ops %s", ops)
		for _, row := range res.Rows {
			fin, _ := row.Get("finished")
			require.Equal(t, true, fin, "ops %s: %v", ops, row)
			require.Zero(t, mustFloat(t, row, "failed_wrs"), "ops %s: %v", ops, row)
		}
	}
}

// Unknown operations are refused with the valid names.
func TestOpsUnknown(t *testing.T) {
	_, err := Parse("ops.yaml", []byte(opsExperiment), []string{"workload.ops=[write, atomic]"})
	require.ErrorContains(t, err, `workload.ops[1]: unknown operation "atomic"`)
	require.ErrorContains(t, err, "send_imm")
}

// The capture experiment holds what the conformance test looks for: NAKs
// and CNPs, on a single plane, and finishes.
func TestRoCEv2CaptureExperiment(t *testing.T) {
	e, err := Load("../configs/experiments/rocev2-capture.yaml", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"rocev2"}, e.Transports)
	require.Equal(t, 1, e.Cfg.Topology.Planes)
	require.GreaterOrEqual(t, e.Cfg.Pcap.Snaplen, 1<<16-1)
	res, err := e.Execute(Options{})
	require.NoError(t, err)
	require.Len(t, res.Rows, 1)
	row := res.Rows[0]
	for _, k := range []string{"seq_naks", "cnps", "loss_drops", "ce_marks"} {
		v, _ := row.Float(k)
		require.Positive(t, v, "%s: %v", k, row)
	}
	fin, _ := row.Get("finished")
	require.Equal(t, true, fin, fmt.Sprint(row))
	failed, _ := row.Float("failed_wrs")
	require.Zero(t, failed)
}
