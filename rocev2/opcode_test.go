package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpcodeTable(t *testing.T) {
	// Header layouts (IBA Table 38).
	for op, want := range map[Opcode]int{
		OpSendFirst: 12, OpSendMiddle: 12, OpSendLast: 12, OpSendLastImm: 16, OpSendOnly: 12, OpSendOnlyImm: 16,
		OpWriteFirst: 28, OpWriteMiddle: 12, OpWriteLast: 12, OpWriteLastImm: 16, OpWriteOnly: 28, OpWriteOnlyImm: 32,
		OpReadRequest: 28, OpReadResponseFirst: 16, OpReadResponseMid: 12, OpReadResponseLast: 16, OpReadResponseOnly: 16,
		OpAcknowledge: 16, OpUDSendOnly: 20, OpCNP: 12,
	} {
		require.Equal(t, want, HeaderLen(op), "%v", op)
		require.True(t, op.Valid())
	}
	require.Equal(t, 0, HeaderLen(0x15))
	require.Equal(t, "unknown opcode", Opcode(0x15).String())
	require.Equal(t, Opcode(0x81), OpCNP)
	require.True(t, OpReadRequest.IsRequest())
	require.False(t, OpAcknowledge.IsRequest())
}
