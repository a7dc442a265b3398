package metaroce

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// TestIdxHeapOrdersAndMoves moves, removes and re-adds ids at random and
// checks the heap against a plain map of what it should hold.
func TestIdxHeapOrdersAndMoves(t *testing.T) {
	const n = 300
	h := newIdxHeap(n, nil)
	want := map[int]int64{}
	rng := rand.New(rand.NewPCG(5, 6))
	for step := 0; step < 5000; step++ {
		id := rng.IntN(n)
		switch rng.IntN(5) {
		case 0:
			h.Set(id, int64(verbs.Never))
			delete(want, id)
		case 1:
			h.Remove(id)
			delete(want, id)
		default:
			k := rng.Int64N(1000) - 500
			h.Set(id, k)
			want[id] = k
		}
		if h.Len() != len(want) {
			t.Fatalf("step %d: %d ids, want %d", step, h.Len(), len(want))
		}
		checkIdxHeap(t, &h)
		if len(want) > 0 {
			if k, ok := want[h.Top()]; !ok || k != h.Min() {
				t.Fatalf("step %d: top %d with %d, want it held with that key (%v, %d)", step, h.Top(), h.Min(), ok, k)
			}
			keys := make([]int64, 0, len(want))
			for _, k := range want {
				keys = append(keys, k)
			}
			if m := slices.Min(keys); m != h.Min() {
				t.Fatalf("step %d: min %d, want %d", step, h.Min(), m)
			}
		}
	}
	for len(want) > 0 { // drain in key order
		id, k := h.Top(), h.Min()
		if want[id] != k {
			t.Fatalf("id %d key %d, want %d", id, k, want[id])
		}
		for _, o := range want {
			if o < k {
				t.Fatalf("popped %d before %d", k, o)
			}
		}
		h.Remove(id)
		delete(want, id)
	}
	if h.Len() != 0 {
		t.Fatalf("%d ids left", h.Len())
	}
}

// checkIdxHeap fails unless every entry's key is at least its parent's and
// every id's recorded position is where it is.
func checkIdxHeap(t *testing.T, h *idxHeap) {
	t.Helper()
	for i, e := range h.es {
		if i > 0 && e.key < h.es[(i-1)/idxArity].key {
			t.Fatalf("entry %d (key %d) below its parent (key %d)", i, e.key, h.es[(i-1)/idxArity].key)
		}
		if int(h.pos[e.id]) != i+1 {
			t.Fatalf("id %d at %d, recorded at %d", e.id, i, h.pos[e.id]-1)
		}
	}
}
