package rocev2

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAETHSyndromes(t *testing.T) {
	require.Equal(t, Syndrome(0x60), SynNAKSequence)
	require.Equal(t, KindACK, SynACK.Kind())
	require.Equal(t, uint8(0x1F), SynACK.Value())
	require.Equal(t, KindRNR, (SynRNR | 12).Kind())
	require.Equal(t, uint8(12), (SynRNR | 12).Value())
	require.Equal(t, KindNAK, SynNAKRemoteAccess.Kind())
	b := make([]byte, AETHLen)
	a := AETH{Syndrome: SynNAKSequence, MSN: 0xFEDCBA}
	a.Put(b)
	require.Equal(t, "60fedcba", hex.EncodeToString(b))
	var g AETH
	require.NoError(t, g.Decode(b))
	require.Equal(t, a, g)
	for _, bad := range []byte{0x80, 0x40, 0x65} {
		b[0] = bad
		require.ErrorIs(t, g.Decode(b), ErrField, "%#x", bad)
	}
}

func TestTimerTables(t *testing.T) {
	require.Equal(t, 655360*time.Microsecond, RNRTimer(0))
	require.Equal(t, 10*time.Microsecond, RNRTimer(1))
	require.Equal(t, 640*time.Microsecond, RNRTimer(12))
	require.Equal(t, 491520*time.Microsecond, RNRTimer(31))
	require.Equal(t, time.Duration(0), AckTimeout(0))
	require.Equal(t, 1048576*time.Nanosecond, AckTimeout(8))
	require.Equal(t, 67108864*time.Nanosecond, AckTimeout(14))
}
