package sim

import (
	"github.com/metaroce/metaroce/verbs"
)

// evKind says what an event does; a and b are its operands.
type evKind uint8

const (
	evArrive     evKind = iota // packet b reaches the far end of link a
	evTxDone                   // host NIC port a finished serializing a packet
	evTimer                    // host a's transport timer, armed as generation b
	evSample                   // the periodic measurement tick
	evFault                    // fault a of the run's schedule happens (b=0) or ends (b=1)
	evReconverge               // routing converges on the current link states
	evStop                     // the run's virtual time is up
	evBegin                    // the workload starts sending
	evPortDone                 // lossless mode: switch port a finished serializing a packet
	evPause                    // lossless mode: a PAUSE (b=1) or RESUME (b=0) reaches link a's sender
)

// event is one scheduled happening, stored by value in the queue.
type event struct {
	at   verbs.Time
	seq  uint64
	a, b int32
	kind evKind
}

// before orders events by time, then by the order they were scheduled in.
// seq is unique within a run, so the order is total: two events at the same
// nanosecond always run in scheduling order, whatever the heap's shape.
func (e *event) before(f *event) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	return e.seq < f.seq
}

// eventQueue is a 4-ary min-heap of events ordered by before. It is
// hand-written (no container/heap, no interfaces) so push and pop move
// plain values and allocate nothing once the backing array has grown to
// the run's working size; 4-ary because it halves the depth of a binary
// heap and keeps siblings in one cache line.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

// push schedules an event.
func (q *eventQueue) push(at verbs.Time, kind evKind, a, b int32) {
	q.seq++
	q.h = append(q.h, event{at: at, seq: q.seq, a: a, b: b, kind: kind})
	h := q.h
	i := len(h) - 1
	e := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// peek returns the earliest event; the queue must not be empty.
func (q *eventQueue) peek() *event { return &q.h[0] }

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	q.h = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
		}
		if !h[m].before(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top
}
