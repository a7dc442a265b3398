package queue

// Slot is the part of a connection that a Scheduler keeps: its deadline,
// its place in the timer heap, whether it waits in the ready line, and the
// connection itself, so the scheduler can hand it back. Embed one in the
// connection and Init it when the connection is made. Only the scheduler
// writes a Slot after that; the connection may read Deadline, which means
// something once SetDeadline has set it.
//
// The scheduler takes slots, not connections, so that finding a
// connection's slot costs no call on the packet path.
type Slot[C any] struct {
	Timer      // Deadline is the connection's next deadline (Never: none)
	ready bool // in the ready line
	gone  bool // forgotten: PopReady passes it over
	conn  C
}

// Init binds the slot to its connection c: once, before any scheduler
// sees the slot. A slot belongs to one scheduler.
func (s *Slot[C]) Init(c C) { s.conn = c }

// Ready reports whether the connection waits in the ready line.
func (s *Slot[C]) Ready() bool { return s.ready }

// Scheduler decides which connection of an endpoint runs next. It keeps a
// FIFO line of the connections that have something to send, served round
// robin, and a heap of their deadlines, served earliest first. What a
// connection sends and when its deadline falls are the endpoint's
// business: the scheduler only orders connections, so that both transport
// cores make their decisions with one implementation.
//
// Contract:
//   - One goroutine: the endpoint's owner, the only one that calls the
//     endpoint. No method is safe for concurrent use; none blocks.
//   - Ownership: the scheduler holds references to connections but owns
//     none. The endpoint creates them and calls Forget when one goes away:
//     that drops its timer, and PopReady never hands it out again (it
//     leaves the ready line when its turn comes, so ReadyLen counts it
//     until then).
//   - Once: a connection is in the ready line at most once, at the place
//     it first became ready; Requeue while it waits does not move it.
//   - Round robin: PopReady hands connections out in the order they became
//     ready. A connection that was served and is made ready again
//     (Requeue) goes to the back, behind every connection already waiting.
//   - Timers: Expire runs due connections in deadline order; the order of
//     equal deadlines is the heap's: deterministic, not first-come.
//   - Allocation: the line and the heap reuse their storage, so once they
//     have grown to the working size no method allocates.
type Scheduler[C any] struct {
	ready  Ring[*Slot[C]]
	timers TimerHeap[*Slot[C]]
	due    []C // scratch for Expire
}

// NewScheduler returns an empty scheduler.
func NewScheduler[C any]() Scheduler[C] {
	return Scheduler[C]{timers: NewTimerHeap(func(sl *Slot[C]) *Timer { return &sl.Timer })}
}

// SetDeadline records a connection's new deadline (Never: none) after
// anything happened to it. It leaves the ready line alone: a connection
// that is ready now is also given to Requeue. The two are separate calls,
// not one, so that each is small enough to inline on the packet path.
func (s *Scheduler[C]) SetDeadline(sl *Slot[C], deadline int64) {
	sl.Deadline = deadline
	s.timers.Set(sl)
}

// Requeue puts a connection at the back of the ready line unless it waits
// there already: for one that has something to send now, or one just
// served that the endpoint wants to give another turn.
func (s *Scheduler[C]) Requeue(sl *Slot[C]) {
	if !sl.ready {
		sl.ready = true
		s.ready.Push(sl)
	}
}

// PopReady removes the connection at the front of the ready line and
// returns it, passing over forgotten ones; false when the line is empty.
// The connection keeps its deadline; it is ready again only when Requeue
// says so.
func (s *Scheduler[C]) PopReady() (C, bool) {
	for s.ready.Len() > 0 {
		sl := s.ready.Pop()
		sl.ready = false
		if !sl.gone {
			return sl.conn, true
		}
	}
	var zero C
	return zero, false
}

// ReadyLen is the number of connections in the ready line.
func (s *Scheduler[C]) ReadyLen() int { return s.ready.Len() }

// NextDeadline is the earliest deadline of any connection (Never if none).
func (s *Scheduler[C]) NextDeadline() int64 {
	// The heap's keys, not Len and Min: small enough that an endpoint's
	// own NextDeadline around this call still inlines.
	if len(s.timers.keys) == 0 {
		return Never
	}
	return s.timers.keys[0]
}

// Forget drops a connection's timer and keeps PopReady from handing it
// out, for one that went away. SetDeadline may still queue its timer (an
// endpoint that does so gets it back from Expire); nothing makes PopReady
// hand it out again.
func (s *Scheduler[C]) Forget(sl *Slot[C]) {
	sl.gone = true
	s.timers.Remove(sl)
}

// Expire takes every connection whose deadline is at or before now out of
// the heap, earliest first, and then calls run on each in that order. run
// may set the deadline of any connection or requeue it, the one it is given
// included; one given a deadline at or before now again is not run again
// in this call, and one that an earlier run forgets is still run. run must
// not call Expire. Expire keeps no reference to a connection after it
// returns.
func (s *Scheduler[C]) Expire(now int64, run func(C)) {
	s.due = s.due[:0]
	for s.timers.Len() > 0 && s.timers.Min() <= now {
		s.due = append(s.due, s.timers.PopMin().conn)
	}
	for _, c := range s.due {
		run(c)
	}
	clear(s.due)
}
