package rocev2

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBTHRoundTripAndLayout(t *testing.T) {
	h := BTH{Opcode: OpWriteOnlyImm, SE: true, M: true, PadCount: 3, PKey: 0x8001, FECN: true, BECN: true,
		DestQP: 0xABCDEF, AckReq: true, PSN: 0x123456}
	b := make([]byte, BTHLen)
	h.Put(b)
	require.Equal(t, "0bf08001c0abcdef80123456", hex.EncodeToString(b))
	var g BTH
	require.NoError(t, g.Decode(b))
	require.Equal(t, h, g)
	// Reserved bits are ignored on receipt.
	b[4] |= 0x3F
	b[8] |= 0x7F
	require.NoError(t, g.Decode(b))
	require.Equal(t, h, g)
	b[1] |= 1 // TVer 1
	require.ErrorIs(t, g.Decode(b), ErrVersion)
	b[1] &^= 1
	b[0] = 0x15 // an atomic: not supported
	require.ErrorIs(t, g.Decode(b), ErrOpcode)
	require.ErrorIs(t, g.Decode(b[:11]), ErrShort)
}
