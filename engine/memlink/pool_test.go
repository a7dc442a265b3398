package memlink

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoolReusesBuffers(t *testing.T) {
	var p bufPool
	b := p.get(100)
	require.Len(t, b, 100)
	require.GreaterOrEqual(t, cap(b), minBufCap)
	p.put(b)
	c := p.get(1500)
	require.Len(t, c, 1500)
	require.Same(t, &b[:1][0], &c[:1][0], "the freed buffer should be handed out again")
	require.Empty(t, p.free)
}

func TestPoolSkipsTooSmallBuffer(t *testing.T) {
	var p bufPool
	small := p.get(10)
	p.put(small)
	big := p.get(minBufCap + 1)
	require.Len(t, big, minBufCap+1)
	require.Len(t, p.free, 1, "the small buffer stays free for a smaller packet")
	require.Same(t, &small[:1][0], &p.get(10)[:1][0])
}
