//go:build dpdk

package dpdkengine

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refChecksum is RFC 1071 written the slow, obvious way.
func refChecksum(b []byte, initial uint32) uint16 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestChecksumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		require.Equal(t, refChecksum(b, 0), Checksum(b, 0), "n=%d", n)
	}
	// All ones: the carry chain folds correctly.
	b := make([]byte, 4096)
	for i := range b {
		b[i] = 0xff
	}
	require.Equal(t, refChecksum(b, 0), Checksum(b, 0))
	// RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
	require.Equal(t, ^uint16(0xddf2), Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, 0))
}

var (
	macA = MAC{0x02, 0, 0, 0, 0, 1}
	macB = MAC{0x02, 0, 0, 0, 0, 2}
	ipA  = IPv4{10, 0, 0, 1}
	ipB  = IPv4{10, 0, 0, 2}
)

func TestWriteParseRoundTrip(t *testing.T) {
	ours := Ours{MAC: macB, IP: ipB, Port: 4794}
	for _, soft := range []bool{true, false} {
		b := make([]byte, 2048)
		copy(b[HdrLen:], "hello metaroce")
		n := WriteHeaders(b, &Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 50001, DstPort: 4794,
			ECT: true, SoftIPChecksum: true, SoftUDPChecksum: soft}, 14)
		require.Equal(t, minFrame, n) // padded
		f, d := parseUDP(b[:n], &ours, Checks{})
		require.Equal(t, DropNone, d)
		require.Equal(t, "hello metaroce", string(f.Payload))
		require.Equal(t, macA, f.SrcMAC)
		require.Equal(t, ipA, f.SrcIP)
		require.Equal(t, uint16(50001), f.SrcPort)
		require.False(t, f.CE)
		require.Equal(t, byte(ecnECT0), b[EthHdrLen+1]&ecnMask)
		require.Equal(t, !soft, binary.BigEndian.Uint16(b[HdrLen-2:]) == 0)
		// CE marked by a switch: the IP checksum is fixed up as routers do.
		b[EthHdrLen+1] |= ecnCE
		fixIPSum(b)
		f, d = parseUDP(b[:n], &ours, Checks{})
		require.Equal(t, DropNone, d)
		require.True(t, f.CE)
		// Hardware said bad: trusted without looking.
		_, d = parseUDP(b[:n], &ours, Checks{IPBad: true})
		require.Equal(t, DropIPChecksum, d)
		if soft {
			_, d = parseUDP(b[:n], &ours, Checks{UDPBad: true})
			require.Equal(t, DropUDPChecksum, d)
		}
	}
}

func TestARPRoundTrip(t *testing.T) {
	b := make([]byte, 64)
	n := WriteARP(b, arpRequest, macA, ipA, MAC{}, ipB)
	require.Equal(t, minFrame, n)
	et, _ := EtherType(b)
	require.Equal(t, uint16(etherTypeARP), et)
	a, d := ParseARP(b[:n])
	require.Equal(t, DropNone, d)
	require.Equal(t, ARP{Op: arpRequest, SenderMAC: macA, SenderIP: ipA, TargetIP: ipB}, a)
	require.Equal(t, broadcastMAC, MAC(b[0:6]))
	n = WriteARP(b, arpReply, macB, ipB, macA, ipA)
	a, d = ParseARP(b[:n])
	require.Equal(t, DropNone, d)
	require.Equal(t, ARP{Op: arpReply, SenderMAC: macB, SenderIP: ipB, TargetMAC: macA, TargetIP: ipA}, a)
	require.Equal(t, macA, MAC(b[0:6]))
	_, d = ParseARP(b[:20])
	require.Equal(t, DropRunt, d)
	b[EthHdrLen+7] = 9
	_, d = ParseARP(b[:n])
	require.Equal(t, DropBadARP, d)
}

// parseUDP is ParseUDP returning the frame, for the tests.
func parseUDP(frame []byte, ours *Ours, ck Checks) (UDPFrame, Drop) {
	var f UDPFrame
	d := ParseUDP(frame, ours, ck, &f)
	return f, d
}

// FuzzParseUDP: any frame gets exactly one verdict and no panic; an
// accepted frame's payload lies inside the frame and its IP and UDP
// checksums verify.
func FuzzParseUDP(f *testing.F) {
	b := make([]byte, 200)
	n := WriteHeaders(b, &Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 1, DstPort: 4794,
		SoftIPChecksum: true, SoftUDPChecksum: true}, 100)
	f.Add(b[:n])
	f.Add([]byte{1, 2, 3})
	ours := Ours{MAC: macB, IP: ipB, Port: 4794}
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, d := parseUDP(frame, &ours, Checks{})
		if d != DropNone {
			require.Nil(t, p.Payload)
			return
		}
		require.LessOrEqual(t, len(p.Payload), len(frame)-HdrLen)
		ip := frame[EthHdrLen:]
		require.Zero(t, Checksum(ip[:int(ip[0]&15)*4], 0))
		_, _ = ParseARP(frame)
	})
}

func FuzzParseARP(f *testing.F) {
	b := make([]byte, 64)
	f.Add(b[:WriteARP(b, arpRequest, macA, ipA, MAC{}, ipB)])
	f.Fuzz(func(t *testing.T, frame []byte) {
		a, d := ParseARP(frame)
		if d == DropNone {
			require.True(t, a.Op == arpRequest || a.Op == arpReply)
		}
	})
}

func BenchmarkParseUDP1K(b *testing.B) {
	buf := make([]byte, 2048)
	n := WriteHeaders(buf, &Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 1, DstPort: 4794,
		SoftIPChecksum: true, SoftUDPChecksum: true}, 1024)
	ours := Ours{MAC: macB, IP: ipB, Port: 4794}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var f UDPFrame
	for b.Loop() {
		if d := ParseUDP(buf[:n], &ours, Checks{}, &f); d != DropNone {
			b.Fatal(d)
		}
	}
}

// A frame sent without a UDP checksum (udp_checksum: zero) carries 0 in
// the field, and the receiver accepts it unverified even when the port's
// offload calls it bad; a non-zero checksum is still verified, so a
// corrupted datagram from a peer that computes one is dropped.
func TestZeroUDPChecksum(t *testing.T) {
	ours := Ours{MAC: macB, IP: ipB, Port: 4794}
	b := make([]byte, 2048)
	for i := range 1000 {
		b[HdrLen+i] = byte(i * 13)
	}
	n := WriteHeaders(b, &Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 50001, DstPort: 4794,
		SoftIPChecksum: true}, 1000)
	require.Zero(t, binary.BigEndian.Uint16(b[HdrLen-2:]), "no checksum written")
	for _, ck := range []Checks{{}, {UDPBad: true}, {UDPGood: true}} {
		f, d := parseUDP(b[:n], &ours, ck)
		require.Equal(t, DropNone, d, "%+v", ck)
		require.True(t, f.NoChecksum)
		require.Len(t, f.Payload, 1000)
	}
	// The same datagram with a computed checksum, then one payload bit
	// flipped: verified, dropped.
	n = WriteHeaders(b, &Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 50001, DstPort: 4794,
		SoftIPChecksum: true, SoftUDPChecksum: true}, 1000)
	require.NotZero(t, binary.BigEndian.Uint16(b[HdrLen-2:]))
	f, d := parseUDP(b[:n], &ours, Checks{})
	require.Equal(t, DropNone, d)
	require.False(t, f.NoChecksum)
	b[HdrLen+500] ^= 0x10
	_, d = parseUDP(b[:n], &ours, Checks{})
	require.Equal(t, DropUDPChecksum, d)
}

// TestHeaderTemplate: a template's frames are byte for byte those of
// WriteHeaders, in every checksum mode, with and without ECT, at lengths
// below and above the Ethernet minimum, over whatever the buffer held.
func TestHeaderTemplate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []Header{{SoftIPChecksum: true}, {SoftIPChecksum: true, SoftUDPChecksum: true},
		{OffloadUDP: true}, {}} {
		h := mode
		h.SrcMAC, h.DstMAC, h.SrcIP, h.DstIP, h.DstPort = macA, macB, ipA, IPv4{10, 1, 255, 254}, 4794
		var tpl HeaderTemplate
		tpl.Build(&h)
		for _, n := range []int{0, 1, 17, 18, 19, 100, 1024, 1500} {
			for _, ect := range []bool{false, true} {
				want := make([]byte, HdrLen+max(n, minFrame))
				for i := range want {
					want[i] = byte(r.Uint32())
				}
				got := append([]byte(nil), want...)
				h.SrcPort, h.ECT = uint16(r.Uint32()), ect
				wl := WriteHeaders(want, &h, n)
				gl := tpl.Write(got, h.SrcPort, ect, n)
				require.Equal(t, wl, gl, "%+v n=%d", mode, n)
				require.Equal(t, want[:wl], got[:gl], "%+v n=%d ect=%v", mode, n, ect)
			}
		}
	}
}

// BenchmarkWriteHeaders and BenchmarkHeaderTemplate: the per-frame cost
// of the headers of a 1 KiB data frame, software IP checksum (memif).
func BenchmarkWriteHeaders(b *testing.B) {
	buf := make([]byte, 2048)
	h := Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DstPort: 4794, SoftIPChecksum: true}
	for i := 0; i < b.N; i++ {
		h.SrcPort, h.ECT = uint16(i), true
		WriteHeaders(buf, &h, 1024+28)
	}
}

func BenchmarkHeaderTemplate(b *testing.B) {
	buf := make([]byte, 2048)
	var tpl HeaderTemplate
	tpl.Build(&Header{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DstPort: 4794, SoftIPChecksum: true})
	for i := 0; i < b.N; i++ {
		tpl.Write(buf, uint16(i), true, 1024+28)
	}
}
