package rocev2

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestICRCKnownVector: the ICRC of a WRITE Only, as scapy.contrib.roce
// computes it for the same packet on 10.0.0.1 -> 10.0.0.2, source port
// 0xC123 (the conformance test checks every packet of a run the same way).
func TestICRCKnownVector(t *testing.T) {
	pkt, err := hex.DecodeString("0a10ffff001234568000004d000001000000000000000105000000076162636465666700a24a5b89")
	require.NoError(t, err)
	f := Flow{SrcIP: IPv4{10, 0, 0, 1}, DstIP: IPv4{10, 0, 0, 2}, SrcPort: 0xC123}
	require.True(t, CheckICRC(pkt, f))
	require.Equal(t, uint32(0x895b4aa2), ComputeICRC(pkt, f), "transmitted least significant byte first")
	// Masked fields do not matter: FECN/BECN (resv8a) may change in flight.
	pkt[4] = 0xC0
	require.True(t, CheckICRC(pkt, f))
	pkt[5] ^= 1 // the destination QP does
	require.False(t, CheckICRC(pkt, f))
}

func TestSourcePortAsLinux(t *testing.T) {
	// rdma_calc_flow_label(0x11, 0x12) = 0x132 -> 0xC000 | 0x132.
	require.Equal(t, uint16(0xC132), SourcePort(0x11, 0x12))
	require.Equal(t, SourcePort(0x1234, 0x5678), SourcePort(0x5678, 0x1234), "symmetric")
	// v = 0x123456 * 0xABCDEF = 0xC379AA6C26A; v ^= v>>20; v ^= v>>40;
	// fl = v & 0xFFFFF; port = 0xC000 | (fl&0x3FFF ^ fl>>14).
	v := uint64(0x123456) * 0xABCDEF
	v ^= v >> 20
	v ^= v >> 40
	fl := uint16(v&0xFFFFF&0x3FFF) ^ uint16((v&0xFFFFF)>>14)
	require.Equal(t, 0xC000|fl, SourcePort(0x123456, 0xABCDEF))
	for q := uint32(2); q < 2000; q += 7 {
		require.GreaterOrEqual(t, SourcePort(q, 0x100), uint16(0xC000))
	}
	require.Equal(t, uint16(0xC001), GSIPort)
}
