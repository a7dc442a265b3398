package metaroce

import "github.com/metaroce/metaroce/verbs"

// idxHeap is a 4-ary min-heap of small integer ids (a connection's path
// indexes) ordered by an int64 key. Keys and ids are stored side by side in
// the heap's own array, so sifting touches only it, not the objects the ids
// name: with hundreds of paths per connection that is what keeps a heap
// move from costing a cache miss per level. Four children per node halve
// the depth of a binary heap (a move past 256 paths is 4 levels, not 8),
// and the four siblings a level compares lie in one or two cache lines.
// Sifting moves the hole, not the entry: each level writes one entry and
// one position, not two of each.
//
// Ties between equal keys are broken arbitrarily (by the heap's layout);
// every user reads only the smallest key, or has distinct keys, so no
// decision depends on that layout.
type idxHeap struct {
	es  []idxEntry
	pos []int32 // by id: position in es + 1; 0 = not in the heap (may be shared by heaps whose ids are disjoint)
}

type idxEntry struct {
	key int64
	id  int32
}

// idxArity is the number of children of a node.
const idxArity = 4

// newIdxHeap returns an empty heap with room for n ids without growing,
// for ids 0..n-1, or, with shared, one whose positions live in shared
// (heaps that never hold the same id at once may share one).
func newIdxHeap(n int, shared []int32) idxHeap {
	if shared == nil {
		shared = make([]int32, n)
	}
	return idxHeap{es: make([]idxEntry, 0, n), pos: shared}
}

// Len is the number of ids in the heap.
func (h *idxHeap) Len() int { return len(h.es) }

// Min is the smallest key (the heap must not be empty).
func (h *idxHeap) Min() int64 { return h.es[0].key }

// Top is an id with the smallest key (the heap must not be empty).
func (h *idxHeap) Top() int { return int(h.es[0].id) }

// Set puts id in the heap with key, moving it if it is there already; a
// key of Never removes it. Setting the key an id already has costs no
// sifting.
func (h *idxHeap) Set(id int, key int64) {
	if key == int64(verbs.Never) {
		h.Remove(id)
		return
	}
	i := int(h.pos[id]) - 1
	if i < 0 {
		h.es = append(h.es, idxEntry{})
		h.up(len(h.es)-1, idxEntry{key, int32(id)})
		return
	}
	old := h.es[i].key
	switch {
	case key < old:
		h.up(i, idxEntry{key, int32(id)})
	case key > old:
		h.down(i, idxEntry{key, int32(id)})
	}
}

// Remove takes id out of the heap if it is there.
func (h *idxHeap) Remove(id int) {
	i := int(h.pos[id]) - 1
	if i < 0 {
		return
	}
	h.pos[id] = 0
	last := len(h.es) - 1
	e := h.es[last]
	h.es = h.es[:last]
	if i == last {
		return
	}
	if i > 0 && e.key < h.es[(i-1)/idxArity].key {
		h.up(i, e)
	} else {
		h.down(i, e)
	}
}

// place puts e at position i.
func (h *idxHeap) place(i int, e idxEntry) {
	h.es[i] = e
	h.pos[e.id] = int32(i + 1)
}

// up puts e, whose key is at most that of the entry it replaces, at hole i
// or above it.
func (h *idxHeap) up(i int, e idxEntry) {
	for i > 0 {
		p := (i - 1) / idxArity
		if e.key >= h.es[p].key {
			break
		}
		h.place(i, h.es[p])
		i = p
	}
	h.place(i, e)
}

// down puts e, whose key is at least that of the entry it replaces, at
// hole i or below it.
func (h *idxHeap) down(i int, e idxEntry) {
	n := len(h.es)
	for {
		c := idxArity*i + 1
		if c >= n {
			break
		}
		m := c
		for j, end := c+1, min(c+idxArity, n); j < end; j++ {
			if h.es[j].key < h.es[m].key {
				m = j
			}
		}
		if h.es[m].key >= e.key {
			break
		}
		h.place(i, h.es[m])
		i = m
	}
	h.place(i, e)
}
