package rocev2

// connHeap is a binary min-heap of connections ordered by deadline, so the
// endpoint finds its next timer in O(1) and updates one in O(log n) with
// thousands of connections. Each connection records its index.
type connHeap struct {
	items []*Conn
}

func (h *connHeap) len() int { return len(h.items) }

func (h *connHeap) min() Time { return h.items[0].deadline }

// set inserts, moves or removes c according to c.deadline.
func (h *connHeap) set(c *Conn) {
	if c.deadline == Never {
		h.remove(c)
		return
	}
	if c.heapIdx < 0 {
		c.heapIdx = len(h.items)
		h.items = append(h.items, c)
		h.up(c.heapIdx)
		return
	}
	if !h.up(c.heapIdx) {
		h.down(c.heapIdx)
	}
}

func (h *connHeap) remove(c *Conn) {
	i := c.heapIdx
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	h.swap(i, last)
	h.items[last] = nil
	h.items = h.items[:last]
	c.heapIdx = -1
	if i < last {
		if !h.up(i) {
			h.down(i)
		}
	}
}

func (h *connHeap) popMin() *Conn {
	c := h.items[0]
	h.remove(c)
	return c
}

func (h *connHeap) less(i, j int) bool { return h.items[i].deadline < h.items[j].deadline }

func (h *connHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIdx = i
	h.items[j].heapIdx = j
}

func (h *connHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (h *connHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}
