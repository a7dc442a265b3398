//go:build dpdk

package mempool

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Without an EAL, regions are anonymous mmaps.
func TestRegionMmap(t *testing.T) {
	r, err := newRegion(1<<20, false)
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

func TestRegionInDPDKMemory(t *testing.T) {
	r, err := NewRegion(1 << 20)
	require.NoError(t, err)
	require.True(t, r.InDPDKMemory())
	require.Zero(t, uintptr(unsafe.Pointer(&r.Bytes()[0]))%4096)
	require.NoError(t, r.Free())
}
