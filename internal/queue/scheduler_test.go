package queue

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

type conn struct {
	s  Slot[*conn]
	id int
}

func newSched() Scheduler[*conn] { return NewScheduler[*conn]() }

func conns(n int) []*conn {
	cs := make([]*conn, n)
	for i := range cs {
		cs[i] = &conn{id: i}
		cs[i].s.Init(cs[i])
	}
	return cs
}

// touch is what an endpoint does after anything happened to a connection.
func touch(s *Scheduler[*conn], c *conn, deadline int64, ready bool) {
	s.SetDeadline(&c.s, deadline)
	if ready {
		s.Requeue(&c.s)
	}
}

// drain pops the whole ready line and returns the ids in order.
func drain(t *testing.T, s *Scheduler[*conn]) []int {
	var ids []int
	for c, ok := s.PopReady(); ok; c, ok = s.PopReady() {
		require.False(t, c.s.Ready(), "a popped connection is out of the line")
		ids = append(ids, c.id)
	}
	return ids
}

func TestSchedulerRoundRobin(t *testing.T) {
	s := newSched()
	cs := conns(3)
	for _, c := range cs {
		touch(&s, c, Never, true)
	}
	touch(&s, cs[0], Never, true) // already waiting: keeps its place
	touch(&s, cs[1], Never, false)
	require.Equal(t, 3, s.ReadyLen())

	// Serve the front and give it another turn: it goes behind the others.
	c, ok := s.PopReady()
	require.True(t, ok)
	require.Equal(t, 0, c.id)
	s.Requeue(&c.s)
	s.Requeue(&c.s) // once only
	require.True(t, c.s.Ready())
	require.Equal(t, []int{1, 2, 0}, drain(t, &s))

	_, ok = s.PopReady()
	require.False(t, ok)
	require.Zero(t, s.ReadyLen())
	// Not ready: a deadline alone does not put a connection in line.
	touch(&s, cs[2], 5, false)
	s.SetDeadline(&cs[1].s, 7)
	require.Empty(t, drain(t, &s))
	require.Equal(t, int64(5), s.NextDeadline())
}

func TestSchedulerTouchedTwiceQueuedOnce(t *testing.T) {
	s := newSched()
	cs := conns(4)
	rng := rand.New(rand.NewPCG(5, 6))
	var want []int // first-ready order, each id once
	in := map[int]bool{}
	for i := 0; i < 100; i++ {
		c := cs[rng.IntN(len(cs))]
		touch(&s, c, rng.Int64N(100), true)
		if !in[c.id] {
			in[c.id] = true
			want = append(want, c.id)
		}
	}
	require.Equal(t, len(want), s.ReadyLen())
	require.Equal(t, want, drain(t, &s))
}

func TestSchedulerExpireInDeadlineOrder(t *testing.T) {
	s := newSched()
	cs := conns(300)
	for _, c := range cs {
		touch(&s, c, Never, false) // Deadline means something once set
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 1000; i++ { // set, move and clear (Never) deadlines at random
		c := cs[rng.IntN(len(cs))]
		d := rng.Int64N(1000)
		if rng.IntN(5) == 0 {
			d = Never
		}
		touch(&s, c, d, false)
	}
	var want []int64
	for _, c := range cs {
		if c.s.Deadline != Never {
			want = append(want, c.s.Deadline)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	require.Equal(t, want[0], s.NextDeadline())

	var got []int64
	s.Expire(499, func(c *conn) { got = append(got, c.s.Deadline) })
	n := sort.Search(len(want), func(i int) bool { return want[i] > 499 })
	require.Equal(t, want[:n], got, "due connections run earliest first, none late")
	require.Equal(t, want[n], s.NextDeadline())

	got = got[:0]
	s.Expire(Never-1, func(c *conn) { got = append(got, c.s.Deadline) })
	require.Equal(t, want[n:], got)
	require.Equal(t, Never, s.NextDeadline())
	for _, c := range s.due[:cap(s.due)] {
		require.Nil(t, c, "Expire keeps no reference")
	}
}

func TestSchedulerExpireEqualDeadlines(t *testing.T) {
	s := newSched()
	cs := conns(6)
	for _, c := range cs {
		touch(&s, c, 10, false)
	}
	touch(&s, cs[5], 11, false)
	runs := map[int]int{}
	var order []int
	s.Expire(10, func(c *conn) {
		runs[c.id]++
		order = append(order, c.id)
		// Due again at once: waits for the next Expire, it does not loop.
		touch(&s, c, 10, false)
		// Touching one that is still to run this round does not drop it.
		touch(&s, cs[4], 10, false)
	})
	require.Equal(t, map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, runs, "each due connection runs once")
	require.Equal(t, int64(10), s.NextDeadline())

	// The order of equal deadlines is the heap's: the same every time.
	s2 := newSched()
	cs2 := conns(6)
	for _, c := range cs2 {
		touch(&s2, c, 10, false)
	}
	touch(&s2, cs2[5], 11, false)
	var order2 []int
	s2.Expire(10, func(c *conn) {
		order2 = append(order2, c.id)
		touch(&s2, c, 10, false)
		touch(&s2, cs2[4], 10, false)
	})
	require.Equal(t, order, order2)
}

func TestSchedulerForget(t *testing.T) {
	s := newSched()
	cs := conns(2)
	touch(&s, cs[0], 3, true)
	touch(&s, cs[1], 4, true)
	s.Forget(&cs[0].s)
	s.Forget(&cs[0].s) // no effect the second time
	require.Equal(t, int64(4), s.NextDeadline())
	var ran []int
	s.Expire(10, func(c *conn) { ran = append(ran, c.id) })
	require.Equal(t, []int{1}, ran, "a forgotten connection has no timer")
	require.Equal(t, 2, s.ReadyLen(), "it leaves the line when its turn comes")
	require.Equal(t, []int{1}, drain(t, &s), "and is not handed out")

	// Requeue cannot bring it back; a deadline set after Forget still fires.
	s.Requeue(&cs[0].s)
	touch(&s, cs[1], Never, true)
	require.Equal(t, []int{1}, drain(t, &s))
	s.SetDeadline(&cs[0].s, 20)
	ran = ran[:0]
	s.Expire(20, func(c *conn) { ran = append(ran, c.id) })
	require.Equal(t, []int{0}, ran)
}

func TestSchedulerSteadyStateAllocatesNothing(t *testing.T) {
	s := newSched()
	cs := conns(64)
	now := int64(0)
	step := func() {
		for _, c := range cs {
			touch(&s, c, now+int64(c.id%7), true)
		}
		for n := s.ReadyLen(); n > 0; n-- { // one turn each
			c, _ := s.PopReady()
			if c.id%2 == 0 {
				s.Requeue(&c.s)
				continue
			}
			s.SetDeadline(&c.s, now+1)
		}
		s.Expire(now+3, func(c *conn) { s.SetDeadline(&c.s, now+10) })
		now += 4
	}
	step() // grow to the working size
	require.Zero(t, testing.AllocsPerRun(100, step))
}
