package pcap

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIPv4ChecksumKnownHeader(t *testing.T) {
	// The classic example header (Wikipedia, "IPv4 header checksum").
	h, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	require.Equal(t, uint16(0xb861), IPv4Checksum(h))
	binary.BigEndian.PutUint16(h[10:], 0xb861)
	require.Zero(t, IPv4Checksum(h))
}

func TestWriterFileAndRecord(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out)
	require.NoError(t, err)
	f := Frame{SrcMAC: MACFromIPv4([4]byte{10, 0, 0, 1}), DstMAC: MACFromIPv4([4]byte{10, 0, 0, 2}),
		SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2}, DSCP: 26, ECN: 3, SrcPort: 0xC123, DstPort: 4791}
	payload := []byte("hello, world")
	require.NoError(t, w.WriteUDP(3_000_000_123, f, payload))
	b := out.Bytes()
	require.Equal(t, "4d3cb2a1020004000000000000000000ffff000001000000", hex.EncodeToString(b[:24]))
	rec := b[24:]
	require.Equal(t, uint32(3), binary.LittleEndian.Uint32(rec[0:]))
	require.Equal(t, uint32(123), binary.LittleEndian.Uint32(rec[4:]))
	n := HeadersLen + len(payload)
	require.Equal(t, uint32(n), binary.LittleEndian.Uint32(rec[8:]))
	require.Equal(t, uint32(n), binary.LittleEndian.Uint32(rec[12:]))
	fr := rec[16:]
	require.Len(t, fr, n)
	require.Equal(t, "02000a00000202000a0000010800", hex.EncodeToString(fr[:14]))
	ip := fr[14:34]
	require.Equal(t, byte(0x45), ip[0])
	require.Equal(t, byte(26<<2|3), ip[1], "DSCP and ECN")
	require.Equal(t, uint16(20+8+len(payload)), binary.BigEndian.Uint16(ip[2:]))
	require.Equal(t, []byte{0, 0, 0x40, 0}, ip[4:8], "id 0, DF")
	require.Equal(t, byte(64), ip[8])
	require.Equal(t, byte(17), ip[9])
	require.Zero(t, IPv4Checksum(ip), "valid header checksum")
	udp := fr[34:42]
	require.Equal(t, "c12312b70014"+"0000", hex.EncodeToString(udp))
	require.Equal(t, payload, fr[42:])
}

func TestWriteUDPRejectsOversizedPayload(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{})
	require.NoError(t, err)
	require.ErrorIs(t, w.WriteUDP(0, Frame{}, make([]byte, 70000)), ErrTooLarge)
}

func TestWriteUDPDoesNotAllocateOnceWarm(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{})
	require.NoError(t, err)
	p := make([]byte, 4096)
	require.NoError(t, w.WriteUDP(0, Frame{}, p))
	w.w = discard{}
	allocs := testing.AllocsPerRun(100, func() { _ = w.WriteUDP(1, Frame{}, p) })
	require.Zero(t, allocs)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
