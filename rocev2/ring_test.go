package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRingFIFOAndGrowth(t *testing.T) {
	var r ring[int]
	for i := 0; i < 20; i++ {
		r.push(i)
	}
	require.Equal(t, 20, r.len())
	for i := 0; i < 5; i++ {
		require.Equal(t, i, r.pop())
	}
	for i := 20; i < 30; i++ {
		r.push(i)
	}
	require.Equal(t, 29, r.popBack())
	require.Equal(t, 5, *r.front())
	require.Equal(t, 7, *r.at(2))
	for i := 5; i < 29; i++ {
		require.Equal(t, i, r.pop())
	}
	require.Equal(t, 0, r.len())
	r.push(1)
	r.clear()
	require.Equal(t, 0, r.len())
}
