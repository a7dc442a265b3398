package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRegionKeysAndAddresses(t *testing.T) {
	e, err := NewEndpoint(Config{})
	require.NoError(t, err)
	pd := e.AllocPD()
	a, err := pd.RegisterMR(make([]byte, 100), AccessLocalWrite|AccessRemoteWrite)
	require.NoError(t, err)
	require.Equal(t, uint64(1)<<40, a.Addr())
	require.Equal(t, uint32(a.LKey()), uint32(a.RKey()))
	key := a.RKey()
	require.NoError(t, a.Deregister())
	require.ErrorIs(t, a.Deregister(), ErrRegionInvalid)
	b, err := pd.RegisterMR(make([]byte, 100), AccessLocalWrite)
	require.NoError(t, err)
	require.Equal(t, a.Addr(), b.Addr(), "the slot is reused")
	require.NotEqual(t, key, b.RKey(), "but a stale key never matches the new region")
	require.Nil(t, e.regions.lookup(uint32(key)))

	// Bounds: [addr, addr+n) must lie inside.
	_, _, ok := e.regions.checkRemote(pd, uint32(b.RKey()), b.Addr()+90, 10, 0)
	require.True(t, ok)
	_, _, ok = e.regions.checkRemote(pd, uint32(b.RKey()), b.Addr()+91, 10, 0)
	require.False(t, ok)
	_, _, ok = e.regions.checkRemote(pd, uint32(b.RKey()), b.Addr()-1, 1, 0)
	require.False(t, ok)
	_, _, ok = e.regions.checkRemote(pd, uint32(b.RKey()), b.Addr(), 1, AccessRemoteWrite)
	require.False(t, ok, "access not granted")
	_, _, ok = e.regions.checkRemote(e.AllocPD(), uint32(b.RKey()), b.Addr(), 1, 0)
	require.False(t, ok, "another protection domain")
	_, _, ok = e.regions.checkRemote(nil, uint32(b.RKey()), b.Addr(), 1, 0)
	require.False(t, ok, "a QP without a protection domain")
	_, _, ok = e.regions.checkRemote(pd, uint32(b.RKey()), b.Addr()+50, 1<<63, 0)
	require.False(t, ok, "no overflow")

	_, err = pd.RegisterMR(nil, 0)
	require.Error(t, err)
	_, err = pd.RegisterMR(make([]byte, 1), 1<<5)
	require.ErrorIs(t, err, ErrBadAccess)
}
