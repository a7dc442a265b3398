package metaroce

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPSNSerialArithmeticAcrossWrap(t *testing.T) {
	require.True(t, PSN(0xFFFFFFFF).Less(0))
	require.True(t, PSN(0xFFFFFF00).Less(0x10))
	require.False(t, PSN(0x10).Less(0xFFFFFF00))
	require.True(t, PSN(5).LessEq(5))
	require.Equal(t, int32(2), PSN(0xFFFFFFFF).Distance(1))
	require.Equal(t, int32(-2), PSN(1).Distance(0xFFFFFFFF))
	// The sequence type wraps at 2^32: assert the width, not just behaviour.
	var p PSN = 0
	p--
	require.Equal(t, PSN(1<<32-1), p)
}
