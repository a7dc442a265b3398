package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCMMessagesRoundTrip(t *testing.T) {
	for _, m := range []CMMessage{
		{Attr: AttrREQ, TID: 0x1122334455667788, LocalCommID: 0x101, QPN: 0x101, StartPSN: 0xABCDEF, MTU: 4096,
			RetryCount: 7, RNRRetryCount: 7, ResponderResources: 16, InitiatorDepth: 16, AckTimeout: 8, PKey: 0xFFFF,
			SrcIP: IPv4{10, 0, 0, 1}, DstIP: IPv4{10, 0, 0, 2}},
		{Attr: AttrREP, TID: 1, LocalCommID: 0x200, RemoteCommID: 0x101, QPN: 0x200, StartPSN: 0x123, MTU: 1024,
			ResponderResources: 16, InitiatorDepth: 4, RNRRetryCount: 3},
		{Attr: AttrRTU, TID: 1, LocalCommID: 0x101, RemoteCommID: 0x200},
		{Attr: AttrREJ, TID: 1, RemoteCommID: 0x101, RejectReason: RejectConsumerReject},
		{Attr: AttrDREQ, TID: 1, LocalCommID: 0x101, RemoteCommID: 0x200, QPN: 0x200},
		{Attr: AttrDREP, TID: 1, LocalCommID: 0x200, RemoteCommID: 0x101},
	} {
		b := make([]byte, MADLen)
		m.Put(b)
		var g CMMessage
		require.NoError(t, g.Decode(b), "%#x", m.Attr)
		require.Equal(t, m, g)
	}
	b := make([]byte, MADLen)
	(&CMMessage{Attr: 0x0011}).Put(b)
	var g CMMessage
	require.ErrorIs(t, g.Decode(b), ErrField, "MRA is not implemented")
	require.ErrorIs(t, g.Decode(b[:100]), ErrShort)
}
