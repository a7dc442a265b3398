package workload

import (
	"github.com/metaroce/metaroce/verbs"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeEnv is a run reduced to what a workload sees: it records dials and
// posts, and a test plays the transport by handing completions back.
type fakeEnv struct {
	now   verbs.Time
	dials [][2]int
	posts []post
}

type post struct {
	c         ConnRef
	src, n    int
	id        uint32
	postedAt  verbs.Time
	delivered bool
}

func (e *fakeEnv) Now() verbs.Time { return e.now }
func (e *fakeEnv) Dial(src, dst int) (ConnRef, error) {
	e.dials = append(e.dials, [2]int{src, dst})
	return ConnRef(len(e.dials) - 1), nil
}
func (e *fakeEnv) Post(c ConnRef, src, n int, id uint32) {
	e.posts = append(e.posts, post{c: c, src: src, n: n, id: id, postedAt: e.now})
}
func (e *fakeEnv) Delivered(c ConnRef) uint64 {
	var d uint64
	for _, p := range e.posts {
		if p.c == c && p.delivered {
			d += uint64(p.n)
		}
	}
	return d
}
func (e *fakeEnv) BaseRTT() verbs.Time        { return 1000 }
func (e *fakeEnv) TakeBinPeak(int) int64      { return 0 }
func (e *fakeEnv) HostPortsUp() (up, all int) { return 2, 2 }

// deliverAll plays a lossless transport: every message posted and not yet
// delivered arrives (a receive completion) and is acknowledged (the
// sender's), 1 µs after the last round, until the workload posts no more.
// It returns the number of messages delivered.
func (e *fakeEnv) deliverAll(t *testing.T, w Workload) int {
	t.Helper()
	n := 0
	for i := 0; i < len(e.posts); i++ {
		e.now += 1000
		p := &e.posts[i]
		p.delivered = true
		w.OnCompletion(e, Completion{Conn: p.c, Recv: true, ID: p.id, Bytes: p.n, OK: true})
		w.OnCompletion(e, Completion{Conn: p.c, ID: p.id, Bytes: p.n, OK: true})
		n++
		require.Less(t, n, 100000, "the workload never stops posting")
	}
	return n
}

type figures struct{ row, series map[string]any }

func (f *figures) Add(k string, v any)             { f.row[k] = v }
func (f *figures) AddSeries(k string, v []float64) { f.series[k] = v }

func newFigures() *figures { return &figures{row: map[string]any{}, series: map[string]any{}} }

var spec2 = &Spec{Hosts: 2, Leaves: 2, HostsPerLeaf: 1, Planes: 1, NICGbps: 100, MTU: 4096, Bin: 10000, End: 1e9}

// Long-lived flows keep Outstanding messages posted, one more for each
// completed, until each has posted FlowSize bytes (the last message
// shorter); the workload is finished once every byte arrived.
func TestLongLivedOutstandingAndFlowSize(t *testing.T) {
	c := &Config{Kind: "long-lived", Pattern: "pair", Connections: 3, Outstanding: 4, MessageSize: 1000, FlowSize: 9500}
	w, err := New(c, spec2)
	require.NoError(t, err)
	e := &fakeEnv{}
	require.NoError(t, w.Setup(e))
	require.Equal(t, [][2]int{{0, 1}, {0, 1}, {0, 1}}, e.dials)
	w.Begin(e)
	require.Len(t, e.posts, 12, "4 outstanding on each of 3 connections")
	require.False(t, w.Finished())
	require.Equal(t, 30, e.deliverAll(t, w), "9500 B in 1000 B messages: 10 per connection")
	perConn := map[ConnRef]int{}
	for _, p := range e.posts {
		require.Equal(t, 0, p.src)
		perConn[p.c] += p.n
	}
	require.Equal(t, map[ConnRef]int{0: 9500, 1: 9500, 2: 9500}, perConn)
	require.True(t, w.Finished())
	f := newFigures()
	w.Report(e, f)
	require.Equal(t, 3, f.row["connections"])
	require.Equal(t, 0, f.row["unfinished_flows"])
	require.Contains(t, f.series, "goodput_gbps")
}

// A ring all-reduce over 4 ranks is 2·(4−1) steps; each rank sends step
// k+1 only after receiving step k, to the next rank, S/n bytes a step.
func TestAllreduceRingSteps(t *testing.T) {
	sp := &Spec{Hosts: 4, Leaves: 2, HostsPerLeaf: 2, Planes: 1, NICGbps: 100, MTU: 4096, Bin: 10000, End: 1e9}
	c := &Config{Kind: "allreduce", Size: 4000, Channels: 1, Iters: 1, Placement: "packed"}
	w, err := New(c, sp)
	require.NoError(t, err)
	require.Equal(t, 1000, w.MaxMessage())
	e := &fakeEnv{}
	require.NoError(t, w.Setup(e))
	require.Equal(t, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}}, e.dials)
	w.Begin(e)
	require.Len(t, e.posts, 4, "step 0 needs nothing: every rank sends at once")
	require.Equal(t, 24, e.deliverAll(t, w), "4 ranks × 6 steps")
	steps := map[uint32]int{}
	for _, p := range e.posts {
		require.Equal(t, 1000, p.n)
		require.Equal(t, e.dials[p.c][0], p.src, "a rank sends on its own connection")
		steps[p.id]++
	}
	require.Equal(t, map[uint32]int{0: 4, 1: 4, 2: 4, 3: 4, 4: 4, 5: 4}, steps)
	require.True(t, w.Finished())
	f := newFigures()
	w.Report(e, f)
	require.Equal(t, 4, f.row["ranks"])
	// 24 deliveries 1 µs apart: the iteration took 24 µs.
	require.InDelta(t, 24.0, f.row["completion_us"], 1e-9)
}

// Placement spread deals the ranks over the leaves in turn.
func TestCollectiveSpreadPlacement(t *testing.T) {
	sp := &Spec{Hosts: 4, Leaves: 2, HostsPerLeaf: 2, Planes: 1, NICGbps: 100, MTU: 4096, Bin: 10000, End: 1e9}
	c := &Config{Kind: "allreduce", Size: 4000, Channels: 1, Iters: 1, Placement: "spread"}
	w, err := New(c, sp)
	require.NoError(t, err)
	e := &fakeEnv{}
	require.NoError(t, w.Setup(e))
	// Ranks 0,1,2,3 on hosts 0,2,1,3: every ring hop crosses leaves.
	require.Equal(t, [][2]int{{0, 2}, {2, 1}, {1, 3}, {3, 0}}, e.dials)
}

// New rejects what cannot run on the hosts there are.
func TestNewChecksHosts(t *testing.T) {
	_, err := New(&Config{Kind: "incast", Senders: 2}, spec2)
	require.ErrorContains(t, err, "workload.senders = 2, want 1..1")
	_, err = New(&Config{Kind: "allreduce", Hosts: 3, Channels: 1, Size: 100}, spec2)
	require.ErrorContains(t, err, "workload.hosts = 3, want 2..2")
	_, err = New(&Config{Kind: "nope"}, spec2)
	require.ErrorContains(t, err, `unknown workload "nope"`)
}
