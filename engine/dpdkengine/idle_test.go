//go:build dpdk

package dpdkengine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// TestIdleShardWaitsInDriver checks the idle path of a shard running an
// application (RunApp): while nothing arrives, the shard waits for frames
// inside its driver call, polling there many times per cgo call, and runs
// its loop (the application's step) once per wait; Kick, from another
// goroutine, ends a wait at once; an idle iteration allocates nothing; and
// a Run hands the shard one command however many steps it runs.
//
// A waits up to 500 ms per driver call (idle_poll), so without Kick its
// step would run twice a second; B uses the default wait (5 µs). Both
// spin (rather than nap) for up to 1 s of idleness.
func TestIdleShardWaitsInDriver(t *testing.T) {
	p := newMemifEnginesCfg(t, 15, Impairment{}, 1, func(i int, c *Config) {
		c.IdleSpin = time.Second // every idle iteration is in the spinning phase: no naps
		if i == 0 {
			c.IdlePoll = 500 * time.Millisecond
		}
	})
	var be [2]*Backend
	for i := range 2 {
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: 1024})
		require.NoError(t, err)
		be[i] = p.eng[i].Backend()
		require.NoError(t, be[i].Attach(ep))
		t.Cleanup(func() { be[i].Close() })
	}

	// A: each Kick gets a step before A's wait would have ended.
	var steps atomic.Int64
	var finish atomic.Bool
	ran := make(chan error, 1)
	go func() {
		ran <- be[0].Run(context.Background(), engine.AppFunc(func(verbs.Time) (bool, error) {
			steps.Add(1)
			return finish.Load(), nil
		}))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for steps.Load() < 1 && time.Now().Before(deadline) { // running: the next iteration waits
		time.Sleep(time.Millisecond)
	}
	const kicks = 5
	for k := range kicks {
		s0 := steps.Load()
		kicked := time.Now()
		if k%2 == 0 {
			be[0].Kick() // the Backend's, for an application that holds only that
		} else {
			be[0].sh.Kick()
		}
		for steps.Load() == s0 && time.Since(kicked) < 400*time.Millisecond {
			time.Sleep(100 * time.Microsecond)
		}
		require.Greater(t, steps.Load(), s0, "kick %d: no step within 400ms of Kick (a wait is 500ms)", k)
	}
	finish.Store(true)
	be[0].sh.Kick()
	require.NoError(t, <-ran)
	c, err := be[0].sh.Counters()
	require.NoError(t, err)
	t.Logf("A: %d steps, %d loops, %d driver calls, %d rx polls, %d waits", steps.Load(), c.Loops, c.DriverCalls, c.RxPolls, c.IdleWaits)
	require.GreaterOrEqual(t, c.IdleWaits, uint64(kicks), "A's idle iterations waited in the driver call")
	require.Greater(t, c.RxPolls, 100*c.DriverCalls, "a wait polls many times per cgo call")
	require.Less(t, c.Loops, uint64(100*kicks), "A's loop ran about once per wait, not once per poll")

	// B: idle iterations wait (5 µs each) and allocate nothing.
	n := 0
	app := engine.AppFunc(func(verbs.Time) (bool, error) { n++; return n%2000 == 0, nil })
	c0, err := be[1].sh.Counters()
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(5, func() { require.NoError(t, be[1].Run(context.Background(), app)) })
	c1, err := be[1].sh.Counters()
	require.NoError(t, err)
	t.Logf("B: %d loops, %d driver calls, %d rx polls, %d waits, %.1f allocs per Run of 2000 iterations",
		c1.Loops-c0.Loops, c1.DriverCalls-c0.DriverCalls, c1.RxPolls-c0.RxPolls, c1.IdleWaits-c0.IdleWaits, allocs)
	require.Greater(t, c1.IdleWaits-c0.IdleWaits, uint64(5*2000/2), "most of B's iterations waited")
	require.Greater(t, c1.RxPolls-c0.RxPolls, c1.DriverCalls-c0.DriverCalls, "B's waits polled more than once")
	require.Less(t, allocs, 20.0, "allocations per Run of 2000 idle iterations (starting the Run; none per iteration)")
	// No hand-off per step: each of the 6 Runs (AllocsPerRun's warm-up
	// and 5) handed the shard one command, its install, for 2000 steps;
	// c1's own Counters is the 7th.
	require.Equal(t, uint64(6*2000), c1.Loops-c0.Loops, "one step per iteration")
	require.Equal(t, uint64(6+1), c1.Commands-c0.Commands, "commands handed to B's shard")
}
