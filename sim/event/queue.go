// Package event is the simulator's event engine: a queue of events in
// virtual time that is also the run's clock. Events are ordered by (time,
// scheduling sequence), so a run that schedules the same events in the
// same order processes them in the same order: determinism is the
// queue's contract, not the scheduler's luck.
package event

import (
	"github.com/metaroce/metaroce/verbs"
)

// Kind says what an event does; the package that schedules events of a
// kind gives it its meaning, and A and B are its operands.
type Kind uint8

// Event is one scheduled happening, stored by value in the queue.
type Event struct {
	At   verbs.Time
	seq  uint64
	A, B int32
	Kind Kind
}

// before orders events by time, then by the order they were scheduled in.
// seq is unique within a run, so the order is total: two events at the same
// nanosecond always run in scheduling order, whatever the heap's shape.
func (e *Event) before(f *Event) bool {
	if e.At != f.At {
		return e.At < f.At
	}
	return e.seq < f.seq
}

// Queue is a 4-ary min-heap of events ordered by before. It is
// hand-written (no container/heap, no interfaces) so push and pop move
// plain values and allocate nothing once the backing array has grown to
// the run's working size; 4-ary because it halves the depth of a binary
// heap and keeps siblings in one cache line.
type Queue struct {
	h   []Event
	seq uint64
	now verbs.Time // the time of the event popped last: the run's clock
}

// Len is the number of events scheduled.
func (q *Queue) Len() int { return len(q.h) }

// Now is the run's virtual time: the time of the event being processed
// (0 before the first). Only pop moves it, so it never goes backwards.
func (q *Queue) Now() verbs.Time { return q.now }

// Push schedules an event of kind k at time at, with operands a and b.
func (q *Queue) Push(at verbs.Time, k Kind, a, b int32) {
	q.seq++
	q.h = append(q.h, Event{At: at, seq: q.seq, A: a, B: b, Kind: k})
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

// Peek returns the earliest event; the queue must not be empty.
func (q *Queue) Peek() *Event { return &q.h[0] }

// Pop removes and returns the earliest event and moves the clock to its
// time; the queue must not be empty.
func (q *Queue) Pop() Event {
	h := q.h
	top := h[0]
	q.now = top.At
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
