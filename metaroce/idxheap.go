package metaroce

import "github.com/metaroce/metaroce/verbs"

// idxHeap is a binary min-heap of small integer ids (a connection's path
// indexes) ordered by an int64 key. Keys and ids are stored in the heap's
// own arrays, so sifting touches only them, not the objects the ids name:
// with hundreds of paths per connection that is what keeps a heap move from
// costing a cache miss per level. Ties between equal keys are broken
// arbitrarily; every user reads only the smallest key, or has distinct
// keys.
type idxHeap struct {
	keys []int64
	ids  []int32
	pos  []int32 // by id: position in keys + 1; 0 = not in the heap (may be shared by heaps whose ids are disjoint)
}

// newIdxHeap returns an empty heap with room for n ids without growing,
// for ids 0..n-1, or, with shared, one whose positions live in shared
// (heaps that never hold the same id at once may share one).
func newIdxHeap(n int, shared []int32) idxHeap {
	if shared == nil {
		shared = make([]int32, n)
	}
	return idxHeap{keys: make([]int64, 0, n), ids: make([]int32, 0, n), pos: shared}
}

// Len is the number of ids in the heap.
func (h *idxHeap) Len() int { return len(h.keys) }

// Min is the smallest key (the heap must not be empty).
func (h *idxHeap) Min() int64 { return h.keys[0] }

// Top is an id with the smallest key (the heap must not be empty).
func (h *idxHeap) Top() int { return int(h.ids[0]) }

// Set puts id in the heap with key, moving it if it is there already; a
// key of Never removes it.
func (h *idxHeap) Set(id int, key int64) {
	if key == int64(verbs.Never) {
		h.Remove(id)
		return
	}
	i := int(h.pos[id]) - 1
	if i < 0 {
		h.keys = append(h.keys, key)
		h.ids = append(h.ids, int32(id))
		i = len(h.keys) - 1
		h.pos[id] = int32(i + 1)
		h.up(i)
		return
	}
	old := h.keys[i]
	h.keys[i] = key
	if key < old {
		h.up(i)
	} else if key > old {
		h.down(i)
	}
}

// Remove takes id out of the heap if it is there.
func (h *idxHeap) Remove(id int) {
	i := int(h.pos[id]) - 1
	if i < 0 {
		return
	}
	h.pos[id] = 0
	last := len(h.keys) - 1
	if i != last {
		h.keys[i], h.ids[i] = h.keys[last], h.ids[last]
		h.pos[h.ids[i]] = int32(i + 1)
	}
	h.keys, h.ids = h.keys[:last], h.ids[:last]
	if i != last {
		h.up(i)
		h.down(i)
	}
}

func (h *idxHeap) swap(i, j int) {
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.pos[h.ids[i]] = int32(i + 1)
	h.pos[h.ids[j]] = int32(j + 1)
}

func (h *idxHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.keys[i] >= h.keys[p] {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *idxHeap) down(i int) {
	n := len(h.keys)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.keys[r] < h.keys[l] {
			m = r
		}
		if h.keys[m] >= h.keys[i] {
			return
		}
		h.swap(i, m)
		i = m
	}
}
