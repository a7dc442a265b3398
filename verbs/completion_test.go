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
