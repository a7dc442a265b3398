package event

import (
	"github.com/metaroce/metaroce/verbs"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// Events come out in time order, and events at the same time in the order
// they were scheduled, whatever the interleaving of pushes and pops.
// Two kinds, to show the queue carries kinds through untouched.
const (
	kindA Kind = iota
	kindB
)

func TestEventQueueOrder(t *testing.T) {
	var q Queue
	rng := rand.New(rand.NewPCG(1, 2))
	type key struct {
		at  verbs.Time
		seq int32
	}
	var want []key
	n := int32(0)
	var got []key
	for round := 0; round < 50; round++ {
		for i := 0; i < 200; i++ {
			at := verbs.Time(rng.IntN(100)) + verbs.Time(round*50)
			q.Push(at, kindA, n, 0)
			want = append(want, key{at, n})
			n++
		}
		for i := 0; i < 100; i++ {
			e := q.Pop()
			got = append(got, key{e.At, e.A})
		}
	}
	for q.Len() > 0 {
		e := q.Pop()
		got = append(got, key{e.At, e.A})
	}
	require.Len(t, got, len(want))
	// Popped times never go backwards relative to what was in the queue at
	// the time: check that ties keep scheduling order globally.
	sort.SliceStable(want, func(i, j int) bool { return want[i].at < want[j].at })
	seen := map[verbs.Time]int32{}
	for _, k := range got {
		if last, ok := seen[k.at]; ok {
			require.Greater(t, k.seq, last, "events at t=%d out of scheduling order", k.at)
		}
		seen[k.at] = k.seq
	}
}

// A plain drain after pushes returns exactly the sorted (time, seq) order.
func TestEventQueueSorted(t *testing.T) {
	var q Queue
	rng := rand.New(rand.NewPCG(3, 4))
	type key struct {
		at  verbs.Time
		seq int32
	}
	var want []key
	for i := int32(0); i < 5000; i++ {
		at := verbs.Time(rng.IntN(300))
		q.Push(at, kindB, i, 0)
		want = append(want, key{at, i})
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].at < want[j].at })
	for _, w := range want {
		e := q.Pop()
		require.Equal(t, w.at, e.At)
		require.Equal(t, w.seq, e.A)
	}
	require.Equal(t, 0, q.Len())
}

func TestEventQueueNoAllocSteadyState(t *testing.T) {
	var q Queue
	for i := 0; i < 1024; i++ {
		q.Push(verbs.Time(i), kindA, 0, 0)
	}
	at := verbs.Time(1024)
	allocs := testing.AllocsPerRun(1000, func() {
		q.Pop()
		q.Push(at, kindA, 0, 0)
		at++
	})
	require.Zero(t, allocs)
}

func BenchmarkEventQueue(b *testing.B) {
	var q Queue
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 100000; i++ {
		q.Push(verbs.Time(rng.IntN(1e6)), kindA, 0, 0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := q.Pop()
		q.Push(e.At+verbs.Time(rng.IntN(1e6)), kindA, 0, 0)
	}
}

// The clock is the time of the event popped last: 0 before any, and it
// does not move on Push or Peek.
func TestQueueClock(t *testing.T) {
	var q Queue
	require.Zero(t, q.Now())
	q.Push(30, kindA, 0, 0)
	q.Push(10, kindB, 0, 0)
	require.Zero(t, q.Now())
	require.EqualValues(t, 10, q.Peek().At)
	require.Zero(t, q.Now())
	require.EqualValues(t, 10, q.Pop().At)
	require.EqualValues(t, 10, q.Now())
	q.Push(20, kindA, 0, 0)
	require.EqualValues(t, 10, q.Now())
	require.Equal(t, kindA, q.Pop().Kind)
	require.EqualValues(t, 20, q.Now())
}
