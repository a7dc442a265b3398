package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every transport is listed under its own name, and the default order
// puts metaroce first.
func TestTransportTable(t *testing.T) {
	require.Len(t, transports, 2)
	for name, tr := range transports {
		require.Equal(t, name, tr.Name())
		got, ok := lookupTransport(name)
		require.True(t, ok)
		require.Equal(t, tr, got)
	}
	require.Equal(t, []string{"metaroce", "rocev2"}, Transports())
	_, ok := lookupTransport("nope")
	require.False(t, ok)
}
