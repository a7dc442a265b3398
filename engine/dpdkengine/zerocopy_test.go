//go:build dpdk

package dpdkengine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestZeroCopyConfig: zero-copy is off unless asked for, the slots
// default to the tx ring plus the shard's pending bursts, and bad values
// name their key. (TestMemifTransferImpaired runs zero-copy TX.)
func TestZeroCopyConfig(t *testing.T) {
	c := Config{Ports: []PortConfig{{Name: "x", IP: "10.0.0.1"}}}.Defaults()
	require.NoError(t, c.Validate())
	require.Zero(t, c.ZeroCopyMin)
	require.Equal(t, c.TxDesc+4*c.Burst, c.ZeroCopySlots)
	c.ZeroCopyMin = -1
	require.ErrorContains(t, c.Validate(), "zero_copy_min")
	c.ZeroCopyMin, c.ZeroCopySlots = 1024, -1
	require.ErrorContains(t, c.Validate(), "zero_copy_slots")
}
