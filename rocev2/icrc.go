package rocev2

import (
	"encoding/binary"
	"hash/crc32"
)

// IPv4 is an IPv4 address in network byte order.
type IPv4 [4]byte

// Flow is what the ICRC needs from the IPv4 and UDP headers that will carry
// (or carried) a packet. The destination port is always UDPPort.
type Flow struct {
	SrcIP, DstIP IPv4
	SrcPort      uint16
}

// ICRC contract (IBA Annex A17.8, RoCEv2 over IPv4).
//
// The ICRC is the CRC-32 of the Ethernet polynomial (as for the Ethernet
// FCS: initial value all ones, result complemented) over
//
//	8 bytes of 0xFF            (stands for the masked LRH of native IB)
//	the IPv4 header            TOS (DSCP and ECN), TTL and header checksum
//	                           replaced by all ones
//	the UDP header             checksum replaced by all ones
//	the BTH                    byte 4 (FECN, BECN, resv6: "resv8a") all ones
//	the rest of the UDP payload up to the ICRC (extension headers, payload,
//	pad)
//
// and is transmitted least significant byte first, as the Ethernet FCS is.
//
// The core does not see the real IP and UDP headers, so it computes the
// ICRC over the headers a backend must build, which are fully fixed by the
// Flow and the packet length:
//
//	IPv4: version 4, IHL 5 (no options), total length 28+len(UDP payload),
//	      identification 0, flags DF (0x4000), fragment offset 0,
//	      protocol 17, source and destination from the Flow; TOS, TTL and
//	      checksum are the backend's (they are masked)
//	UDP:  source port Flow.SrcPort, destination port 4791, length
//	      8+len(UDP payload); checksum is the backend's (masked; RoCEv2
//	      NICs send 0)
//
// A backend that writes real frames (DPDK, the pcap writer, a simulator
// with --pcap) must use exactly these values for the frames to carry a
// valid ICRC on the wire. A backend whose kernel writes the IP header (UDP
// sockets) needs nothing: the receiver rebuilds the same pseudo-header from
// its own knowledge of the flow, never from the received headers.
const pseudoLen = 8 + 20 + 8 + BTHLen

// ComputeICRC returns the ICRC of pkt, a whole UDP payload whose last
// ICRCLen bytes are the ICRC slot (their content is ignored), sent on flow f.
// pkt must be at least BTHLen+ICRCLen long.
func ComputeICRC(pkt []byte, f Flow) uint32 {
	var ph [pseudoLen]byte
	for i := 0; i < 8; i++ {
		ph[i] = 0xFF
	}
	ip := ph[8:28]
	udpLen := len(pkt) + 8
	ip[0] = 0x45
	ip[1] = 0xFF // TOS masked
	binary.BigEndian.PutUint16(ip[2:], uint16(udpLen+20))
	// identification 0
	ip[6], ip[7] = 0x40, 0 // DF
	ip[8] = 0xFF           // TTL masked
	ip[9] = 17
	ip[10], ip[11] = 0xFF, 0xFF // checksum masked
	copy(ip[12:16], f.SrcIP[:])
	copy(ip[16:20], f.DstIP[:])
	u := ph[28:36]
	binary.BigEndian.PutUint16(u[0:], f.SrcPort)
	binary.BigEndian.PutUint16(u[2:], UDPPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0xFF, 0xFF // checksum masked
	copy(ph[36:48], pkt[:BTHLen])
	ph[36+4] = 0xFF // resv8a
	// The pseudo-header goes through a plain table loop so that it stays on
	// the stack (hash/crc32 calls through function values, which would make
	// it escape); the bulk of the packet uses the accelerated path.
	crc := ^uint32(0)
	tab := crc32.IEEETable
	for _, v := range ph {
		crc = tab[byte(crc)^v] ^ crc>>8
	}
	return crc32.Update(^crc, tab, pkt[BTHLen:len(pkt)-ICRCLen])
}

// SealICRC computes the ICRC of pkt[:n] (headers and padded payload) and
// writes it at pkt[n:n+ICRCLen], returning n+ICRCLen.
func SealICRC(pkt []byte, n int, f Flow) int {
	p := pkt[:n+ICRCLen]
	binary.LittleEndian.PutUint32(p[n:], ComputeICRC(p, f))
	return n + ICRCLen
}

// CheckICRC reports whether the ICRC trailer of pkt matches flow f.
func CheckICRC(pkt []byte, f Flow) bool {
	if len(pkt) < BTHLen+ICRCLen {
		return false
	}
	return ComputeICRC(pkt, f) == binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:])
}

// SourcePort returns the UDP source port of the RC connection between local
// QP lqpn and remote QP rqpn, computed as Linux does for RoCEv2 when no flow
// label is configured (rdma_calc_flow_label and
// rdma_flow_label_to_udp_sport in include/rdma/ib_verbs.h, used by mlx5 and
// rxe): a 20-bit flow label hashed from the product of the QP numbers,
// folded into 14 bits and placed in 0xC000..0xFFFF. The product is
// symmetric, so both directions of a connection use the same port, and the
// port is fixed for the QP's life: one ECMP path per QP.
func SourcePort(lqpn, rqpn uint32) uint16 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	fl := uint32(v & 0xFFFFF)
	low := fl&0x3FFF ^ (fl&0xFC000)>>14
	return uint16(low | 0xC000)
}

// GSIPort is the UDP source port of connection management packets (QP1 to
// QP1): SourcePort(1, 1).
var GSIPort = SourcePort(1, 1)
