package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPacketDecode(t *testing.T) {
	b := make([]byte, 64)
	h := BTH{Opcode: OpSendOnlyImm, PadCount: 2, DestQP: 5, PSN: 9}
	h.Put(b)
	putUint32(b[12:], 0xCAFEBABE)
	copy(b[16:], "hello!")
	n := SealICRC(b, 16+8, Flow{})
	var p Packet
	require.NoError(t, p.Decode(b[:n]))
	require.Equal(t, "hello!", string(p.Payload))
	require.Equal(t, uint32(0xCAFEBABE), p.Imm)
	require.True(t, CheckICRC(b[:n], Flow{}))
	require.False(t, CheckICRC(b[:n], Flow{SrcPort: 1}), "the flow is part of the ICRC")

	// Payload not a multiple of four, pad count beyond the payload, bytes
	// after an ACK, a CNP of the wrong size.
	require.ErrorIs(t, p.Decode(b[:n-1]), ErrLength)
	h.PadCount = 0
	h.Opcode = OpAcknowledge
	h.Put(b)
	(&AETH{Syndrome: SynACK}).Put(b[BTHLen:])
	require.ErrorIs(t, p.Decode(b[:BTHLen+AETHLen+4+ICRCLen]), ErrLength)
	require.NoError(t, p.Decode(b[:BTHLen+AETHLen+ICRCLen]))
	h.Opcode = OpCNP
	h.Put(b)
	require.ErrorIs(t, p.Decode(b[:BTHLen+ICRCLen]), ErrLength)
	require.NoError(t, p.Decode(b[:BTHLen+CNPPayloadLen+ICRCLen]))
	h = BTH{Opcode: OpSendOnly, PadCount: 3}
	h.Put(b)
	require.ErrorIs(t, p.Decode(b[:BTHLen+ICRCLen]), ErrPad)
	require.ErrorIs(t, p.Decode(b[:BTHLen+3]), ErrShort)
}
