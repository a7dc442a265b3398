//go:build dpdk

package dpdkengine

import (
	"encoding/binary"
	"math/bits"
)

// Frame layout of every metaroce packet on a DPDK port: Ethernet II, IPv4
// without options, UDP, then the protocol core's packet as the UDP payload.
const (
	EthHdrLen  = 14
	IPv4HdrLen = 20
	UDPHdrLen  = 8
	// HdrLen is the bytes in front of the core's packet.
	HdrLen = EthHdrLen + IPv4HdrLen + UDPHdrLen

	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	protoUDP      = 17
	minFrame      = 60 // Ethernet minimum without FCS

	ecnMask = 0x03
	ecnCE   = 0x03
	ecnECT0 = 0x02
)

// MAC is an Ethernet address.
type MAC [6]byte

// IPv4 is an IPv4 address.
type IPv4 [4]byte

var broadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Drop says why a received frame was not handed to the protocol core.
type Drop uint8

const (
	DropNone        Drop = iota
	DropRunt             // shorter than the headers it claims
	DropNonIP            // neither IPv4 nor ARP
	DropNotOurMAC        // unicast to another MAC
	DropBadIPHeader      // version, header length or total length wrong
	DropIPChecksum       // IPv4 header checksum wrong
	DropFragment         // an IP fragment (we never send any)
	DropNotUDP           // another IP protocol
	DropNotOurIP         // IPv4 to an address that is not ours
	DropWrongPort        // UDP to a port that is not ours
	DropUDPLength        // UDP length disagrees with the IP length
	DropUDPChecksum      // UDP checksum wrong
	DropBadARP           // malformed ARP
	DropImpaired         // dropped on purpose by the receive impairment stage
	DropUnknownPeer      // a source not told and over Config.MaxLearnedPeers, or the neighbour table is full
	dropKinds
)

var dropNames = [dropKinds]string{"none", "runt", "non_ip", "not_our_mac", "bad_ip_header", "ip_checksum",
	"fragment", "not_udp", "not_our_ip", "wrong_port", "udp_length", "udp_checksum", "bad_arp", "impaired", "unknown_peer"}

func (d Drop) String() string {
	if d < dropKinds {
		return dropNames[d]
	}
	return "unknown"
}

// Checks says which checksums the port already verified in hardware (from
// the mbuf's ol_flags); the rest are verified in software.
type Checks struct {
	IPGood, IPBad   bool
	UDPGood, UDPBad bool
}

// UDPFrame is a parsed IPv4/UDP frame addressed to us. Payload aliases the
// frame.
type UDPFrame struct {
	SrcMAC  MAC
	SrcIP   IPv4
	SrcPort uint16
	DstPort uint16
	CE      bool
	// NoChecksum: the UDP checksum was 0, "none computed" (RFC 768), so
	// nothing below the transport's own end-to-end check covers Payload.
	NoChecksum bool
	Payload    []byte
}

// Ours is what a frame must be addressed to.
type Ours struct {
	MAC  MAC
	IP   IPv4
	Port uint16
}

// EtherType returns the frame's EtherType, or DropRunt.
func EtherType(frame []byte) (uint16, Drop) {
	if len(frame) < EthHdrLen {
		return 0, DropRunt
	}
	return binary.BigEndian.Uint16(frame[12:14]), DropNone
}

// ParseUDP checks an Ethernet/IPv4/UDP frame against ours and, when it
// is ours (DropNone), fills *f with its fields; otherwise *f is left as
// it was. It never panics on any input (FuzzParseUDP) and reports exactly
// one reason for each frame it rejects.
//
// It fills the caller's UDPFrame rather than returning one: a UDPFrame has
// more fields than the compiler keeps in registers, so a returned one is
// written field by field on the stack and copied with wide loads that
// stall on those stores, once per received frame.
func ParseUDP(frame []byte, ours *Ours, ck Checks, f *UDPFrame) Drop {
	if len(frame) < HdrLen {
		return DropRunt
	}
	if binary.BigEndian.Uint16(frame[12:14]) != etherTypeIPv4 {
		return DropNonIP
	}
	dst := MAC(frame[0:6])
	if dst != ours.MAC && dst != broadcastMAC {
		return DropNotOurMAC
	}
	ip := frame[EthHdrLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < IPv4HdrLen {
		return DropBadIPHeader
	}
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total < ihl+UDPHdrLen || total > len(ip) {
		if total > len(ip) {
			return DropRunt
		}
		return DropBadIPHeader
	}
	switch {
	case ck.IPBad:
		return DropIPChecksum
	case !ck.IPGood:
		if Checksum(ip[:ihl], 0) != 0 {
			return DropIPChecksum
		}
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 {
		return DropFragment
	}
	if ip[9] != protoUDP {
		return DropNotUDP
	}
	if IPv4(ip[16:20]) != ours.IP {
		return DropNotOurIP
	}
	udp := ip[ihl:total]
	if binary.BigEndian.Uint16(udp[2:4]) != ours.Port {
		return DropWrongPort
	}
	if int(binary.BigEndian.Uint16(udp[4:6])) != len(udp) {
		return DropUDPLength
	}
	// A zero checksum means the sender computed none (RFC 768): accept it
	// unverified, whatever the port's offload says (some NICs flag it
	// bad). Any other value is checked, so a peer that does send one
	// keeps its protection.
	sum := binary.BigEndian.Uint16(udp[6:8])
	if sum != 0 {
		switch {
		case ck.UDPBad:
			return DropUDPChecksum
		case !ck.UDPGood:
			if Checksum(udp, pseudoSum(ip[12:16], ip[16:20], len(udp))) != 0 {
				return DropUDPChecksum
			}
		}
	}
	f.SrcMAC = MAC(frame[6:12])
	f.SrcIP = IPv4(ip[12:16])
	f.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	f.DstPort = ours.Port
	f.CE = ip[1]&ecnMask == ecnCE
	f.NoChecksum = sum == 0
	f.Payload = udp[UDPHdrLen:]
	return DropNone
}

// Header is what WriteHeaders puts in front of a payload.
type Header struct {
	SrcMAC, DstMAC   MAC
	SrcIP, DstIP     IPv4
	SrcPort, DstPort uint16
	ECT              bool
	// SoftIPChecksum and SoftUDPChecksum compute the checksums here; when
	// false the IP checksum is left 0 for the NIC (offload) and the UDP
	// checksum is either offloaded (OffloadUDP: the pseudo-header sum is
	// written, as DPDK's offload expects) or left 0, which IPv4 allows.
	SoftIPChecksum  bool
	SoftUDPChecksum bool
	OffloadUDP      bool
}

// WriteHeaders writes the Ethernet, IPv4 and UDP headers in front of the
// payload that already lies at b[HdrLen:HdrLen+n], and returns the frame
// length (padded to the Ethernet minimum).
func WriteHeaders(b []byte, h *Header, n int) int {
	copy(b[0:6], h.DstMAC[:])
	copy(b[6:12], h.SrcMAC[:])
	binary.BigEndian.PutUint16(b[12:14], etherTypeIPv4)
	ip := b[EthHdrLen : EthHdrLen+IPv4HdrLen]
	ip[0] = 0x45
	ip[1] = 0
	if h.ECT {
		ip[1] = ecnECT0
	}
	binary.BigEndian.PutUint16(ip[2:4], uint16(IPv4HdrLen+UDPHdrLen+n))
	binary.BigEndian.PutUint16(ip[4:6], 0)
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // DF
	ip[8] = 64
	ip[9] = protoUDP
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], h.SrcIP[:])
	copy(ip[16:20], h.DstIP[:])
	if h.SoftIPChecksum {
		binary.BigEndian.PutUint16(ip[10:12], Checksum(ip, 0))
	}
	udp := b[EthHdrLen+IPv4HdrLen : HdrLen+n]
	binary.BigEndian.PutUint16(udp[0:2], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], h.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(UDPHdrLen+n))
	udp[6], udp[7] = 0, 0
	return finishUDP(b, h, n)
}

// finishUDP writes the UDP checksum of the frame in b (headers and n
// bytes of payload in place, the checksum field 0) as h's checksum mode
// asks, pads the frame to the Ethernet minimum and returns its length.
func finishUDP(b []byte, h *Header, n int) int {
	udp := b[EthHdrLen+IPv4HdrLen : HdrLen+n]
	switch {
	case h.SoftUDPChecksum:
		s := Checksum(udp, pseudoSum(h.SrcIP[:], h.DstIP[:], len(udp)))
		if s == 0 {
			s = 0xffff
		}
		binary.BigEndian.PutUint16(udp[6:8], s)
	case h.OffloadUDP:
		// DPDK's UDP checksum offload wants the pseudo-header sum, not
		// complemented, in the checksum field.
		binary.BigEndian.PutUint16(udp[6:8], ^fold(pseudoSum(h.SrcIP[:], h.DstIP[:], len(udp))))
	}
	l := HdrLen + n
	if l < minFrame {
		clear(b[l:minFrame])
		l = minFrame
	}
	return l
}

// HeaderTemplate is what WriteHeaders writes for one destination that is
// the same in every frame: built once (Build), it is stamped in front of
// each payload by Write, which sets only the length, ECN, source port and
// checksums. The IPv4 checksum is finished from the sum of the constant
// words, so Write produces exactly WriteHeaders' bytes with less work.
type HeaderTemplate struct {
	b     [HdrLen]byte // length, ECN, source port and checksums zero
	ipSum uint64       // the one's-complement sum of b's IPv4 header
	h     Header
}

// Build makes t the template for h (h's SrcPort, ECT and length are
// ignored: Write takes them per frame).
func (t *HeaderTemplate) Build(h *Header) {
	t.h = *h
	t.h.SrcPort, t.h.ECT = 0, false
	var f [minFrame]byte
	WriteHeaders(f[:], &t.h, 0)
	copy(t.b[:], f[:HdrLen])
	ip := t.b[EthHdrLen : EthHdrLen+IPv4HdrLen]
	ip[2], ip[3], ip[10], ip[11] = 0, 0, 0, 0
	udp := t.b[EthHdrLen+IPv4HdrLen:]
	clear(udp[4:8])
	t.ipSum = sum(ip, 0)
}

// Write is WriteHeaders(b, h, n) for the h that t was built from, with
// srcPort and ect as h's SrcPort and ECT.
func (t *HeaderTemplate) Write(b []byte, srcPort uint16, ect bool, n int) int {
	copy(b[:HdrLen], t.b[:])
	ip := b[EthHdrLen : EthHdrLen+IPv4HdrLen]
	s := t.ipSum
	if ect {
		ip[1] = ecnECT0
		s += ecnECT0
	}
	total := uint16(IPv4HdrLen + UDPHdrLen + n)
	binary.BigEndian.PutUint16(ip[2:4], total)
	if t.h.SoftIPChecksum {
		binary.BigEndian.PutUint16(ip[10:12], ^fold(s+uint64(total)))
	}
	udp := b[EthHdrLen+IPv4HdrLen : HdrLen+n]
	binary.BigEndian.PutUint16(udp[0:2], srcPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(UDPHdrLen+n))
	return finishUDP(b, &t.h, n)
}

func pseudoSum(src, dst []byte, udpLen int) uint64 {
	return uint64(binary.BigEndian.Uint16(src[0:2])) + uint64(binary.BigEndian.Uint16(src[2:4])) +
		uint64(binary.BigEndian.Uint16(dst[0:2])) + uint64(binary.BigEndian.Uint16(dst[2:4])) +
		protoUDP + uint64(udpLen)
}

// Checksum is the Internet checksum (RFC 1071) of b plus an initial sum:
// the complemented one's-complement sum. Over a block that contains its
// own correct checksum it returns 0.
func Checksum(b []byte, initial uint64) uint16 {
	return ^fold(sum(b, initial))
}

// fold reduces a 64-bit one's-complement accumulator to 16 bits (not
// complemented).
func fold(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// sum adds b as big-endian 16-bit words to acc, eight bytes at a time.
func sum(b []byte, acc uint64) uint64 {
	var carry uint64
	for len(b) >= 32 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[8:16]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[16:24]), carry)
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[24:32]), carry)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, carry = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), carry)
		b = b[8:]
	}
	acc, carry = bits.Add64(acc, carry, 0)
	acc += carry
	var tail uint64
	for i := 0; i+1 < len(b); i += 2 {
		tail += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)&1 == 1 {
		tail += uint64(b[len(b)-1]) << 8
	}
	acc, carry = bits.Add64(acc, tail, 0)
	return acc + carry
}
