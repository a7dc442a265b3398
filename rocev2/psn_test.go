package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPSNArithmeticWrapsAt24Bits(t *testing.T) {
	require.Equal(t, PSN(0), PSN(PSNMask).Add(1))
	require.Equal(t, PSN(PSNMask), PSN(0).Add(-1))
	require.Equal(t, 1, PSN(0).Diff(PSN(PSNMask)))
	require.Equal(t, -1, PSN(PSNMask).Diff(0))
	require.True(t, PSN(PSNMask).Less(0))
	require.False(t, PSN(0).Less(PSNMask))
	// The serial window is exactly 2^23 each way.
	require.Equal(t, -(1 << 23), PSN(0).Diff(1<<23))
	require.Equal(t, 1<<23-1, PSN(1<<23-1).Diff(0))
	require.Equal(t, 1<<24, PSNMask+1)
}
