package verbs

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompletionQueueGrowsAndKeepsOrder(t *testing.T) {
	q := NewCompletionQueue(1)
	for i := 0; i < 40; i++ {
		q.push(WorkCompletion{WRID: uint64(i)})
	}
	require.Equal(t, 40, q.Len())
	out := make([]WorkCompletion, 7)
	next := uint64(0)
	for q.Len() > 0 {
		n := q.Poll(out)
		for _, wc := range out[:n] {
			require.Equal(t, next, wc.WRID)
			next++
		}
	}
	require.Equal(t, uint64(40), next)
	require.Zero(t, q.Poll(out))
}

// TestCompletionQueueOnReady: the callback fires at the first push after
// the queue was drained to empty, once however many pushes follow, and
// again only after a Poll empties it.
func TestCompletionQueueOnReady(t *testing.T) {
	q := NewCompletionQueue(4)
	calls := 0
	q.OnReady(func() { calls++ })
	q.push(WorkCompletion{WRID: 1})
	q.push(WorkCompletion{WRID: 2})
	require.Equal(t, 1, calls)
	out := make([]WorkCompletion, 1)
	require.Equal(t, 1, q.Poll(out)) // one left: still flagged
	q.push(WorkCompletion{WRID: 3})
	require.Equal(t, 1, calls)
	out = make([]WorkCompletion, 8)
	require.Equal(t, 2, q.Poll(out)) // empty now
	q.push(WorkCompletion{WRID: 4})
	require.Equal(t, 2, calls)
}
