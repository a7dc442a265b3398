package sim

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Events come out in time order, and events at the same time in the order
// they were scheduled, whatever the interleaving of pushes and pops.
func TestEventQueueOrder(t *testing.T) {
	var q eventQueue
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
			q.push(at, evArrive, n, 0)
			want = append(want, key{at, n})
			n++
		}
		for i := 0; i < 100; i++ {
			e := q.pop()
			got = append(got, key{e.at, e.a})
		}
	}
	for q.len() > 0 {
		e := q.pop()
		got = append(got, key{e.at, e.a})
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
	var q eventQueue
	rng := rand.New(rand.NewPCG(3, 4))
	type key struct {
		at  verbs.Time
		seq int32
	}
	var want []key
	for i := int32(0); i < 5000; i++ {
		at := verbs.Time(rng.IntN(300))
		q.push(at, evTimer, i, 0)
		want = append(want, key{at, i})
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].at < want[j].at })
	for _, w := range want {
		e := q.pop()
		require.Equal(t, w.at, e.at)
		require.Equal(t, w.seq, e.a)
	}
	require.Equal(t, 0, q.len())
}

func TestEventQueueNoAllocSteadyState(t *testing.T) {
	var q eventQueue
	for i := 0; i < 1024; i++ {
		q.push(verbs.Time(i), evArrive, 0, 0)
	}
	at := verbs.Time(1024)
	allocs := testing.AllocsPerRun(1000, func() {
		q.pop()
		q.push(at, evArrive, 0, 0)
		at++
	})
	require.Zero(t, allocs)
}

func BenchmarkEventQueue(b *testing.B) {
	var q eventQueue
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 100000; i++ {
		q.push(verbs.Time(rng.IntN(1e6)), evArrive, 0, 0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := q.pop()
		q.push(e.at+verbs.Time(rng.IntN(1e6)), evArrive, 0, 0)
	}
}
