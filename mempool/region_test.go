package mempool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Without an EAL in this process, regions are anonymous mmaps (the DPDK
// path is covered by engine/dpdkengine, whose tests run a real EAL).
func TestRegionMmap(t *testing.T) {
	r, err := NewRegion(1 << 20)
	require.NoError(t, err)
	require.False(t, r.InDPDKMemory())
	b := r.Bytes()
	require.Len(t, b, 1<<20)
	require.Zero(t, b[12345])
	b[len(b)-1] = 9
	require.NoError(t, r.Free())
	require.Nil(t, r.Bytes())
	require.NoError(t, r.Free()) // twice is harmless

	_, err = NewRegion(0)
	require.Error(t, err)
}

func TestMbufPoolNeedsEAL(t *testing.T) {
	_, err := NewMbufPool("p", 1024, 0, nil)
	require.ErrorContains(t, err, "EAL is not running")
}
