package rocev2

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConnHeapOrdersByDeadline(t *testing.T) {
	var h connHeap
	r := rand.New(rand.NewPCG(1, 2))
	conns := make([]*Conn, 50)
	for i := range conns {
		conns[i] = &Conn{heapIdx: -1, deadline: Time(r.IntN(1000))}
		h.set(conns[i])
	}
	// Move some, remove some.
	for i := 0; i < 10; i++ {
		conns[i].deadline = Time(r.IntN(1000))
		h.set(conns[i])
	}
	conns[20].deadline = Never
	h.set(conns[20])
	h.remove(conns[21])
	require.Equal(t, 48, h.len())
	last := Time(-1)
	for h.len() > 0 {
		c := h.popMin()
		require.GreaterOrEqual(t, c.deadline, last)
		last = c.deadline
		require.Equal(t, -1, c.heapIdx)
	}
}
