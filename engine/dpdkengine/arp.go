//go:build dpdk

package dpdkengine

import "encoding/binary"

// ARP over Ethernet for IPv4 (RFC 826): enough to answer who-has for our
// address and to resolve our neighbours.
const (
	arpLen     = 28
	arpRequest = 1
	arpReply   = 2
)

// ARP is a parsed Ethernet/IPv4 ARP packet.
type ARP struct {
	Op                 uint16
	SenderMAC          MAC
	SenderIP, TargetIP IPv4
	TargetMAC          MAC
}

// ParseARP decodes the ARP packet in an Ethernet frame whose EtherType is
// ARP.
func ParseARP(frame []byte) (ARP, Drop) {
	var a ARP
	if len(frame) < EthHdrLen+arpLen {
		return a, DropRunt
	}
	p := frame[EthHdrLen:]
	if binary.BigEndian.Uint16(p[0:2]) != 1 || binary.BigEndian.Uint16(p[2:4]) != etherTypeIPv4 || p[4] != 6 || p[5] != 4 {
		return a, DropBadARP
	}
	a.Op = binary.BigEndian.Uint16(p[6:8])
	if a.Op != arpRequest && a.Op != arpReply {
		return a, DropBadARP
	}
	a.SenderMAC = MAC(p[8:14])
	a.SenderIP = IPv4(p[14:18])
	a.TargetMAC = MAC(p[18:24])
	a.TargetIP = IPv4(p[24:28])
	return a, DropNone
}

// WriteARP writes an ARP frame into b (at least 60 bytes) and returns its
// length. Requests go to broadcast; replies to the asker.
func WriteARP(b []byte, op uint16, src MAC, srcIP IPv4, dst MAC, dstIP IPv4) int {
	eth := broadcastMAC
	target := MAC{}
	if op == arpReply {
		eth, target = dst, dst
	}
	copy(b[0:6], eth[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:14], etherTypeARP)
	p := b[EthHdrLen:]
	binary.BigEndian.PutUint16(p[0:2], 1)
	binary.BigEndian.PutUint16(p[2:4], etherTypeIPv4)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], op)
	copy(p[8:14], src[:])
	copy(p[14:18], srcIP[:])
	copy(p[18:24], target[:])
	copy(p[24:28], dstIP[:])
	clear(b[EthHdrLen+arpLen : minFrame])
	return minFrame
}
