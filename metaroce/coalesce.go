package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// Coalescing: several packets of one connection in one datagram.
//
// A backend whose cost is per frame (af_packet over a veth spends
// microseconds of the sending core in the kernel for each one, whatever its
// size) sends small messages far below the wire's rate: a 64-byte SEND is
// a 134-byte packet. NextCoalesced lets it append further packets of the
// same connection to a datagram NextPacket has just built, up to the
// connection's largest packet, so one frame carries several.
//
// On the wire (docs/protocol.md §2.1) a coalesced datagram is
//
//	0xC2 | len (2 bytes) | packet | len | packet | ...
//
// where each packet is a whole packet as it would travel alone, trailer
// included. A lone packet starts with its version (2), so the first byte
// tells the two apart. The framing carries no integrity of its own: each
// inner packet's CRC32C or seal proves it, and a forged length can only
// misalign the inner packets, which then fail their checks, or drop them,
// as a lost datagram would.
//
// What goes in a datagram, and why nothing else does:
//
//   - The first packet is whatever NextPacket chose; it names the
//     datagram's path (entropy, plane). Follow-ons are only new data
//     chunks of the same connection, on that path and within its window:
//     one datagram takes one ECMP route, so a packet in it that belonged
//     to another path would be measured (RTT, ECN) on the wrong route.
//   - A follow-on is built only when NextPacket itself would build new
//     data next: no control packet, due ACK, resend or moved packet is
//     waiting, and neither pacing nor the congestion window holds new
//     data back. A due ACK therefore never trails data built after it
//     (a verbs application sees its send complete before the answer).
//   - A datagram that starts with data takes follow-ons only once the
//     connection has coalesceBacklog packets in flight: with fewer, it is
//     bound by round trips, and separate datagrams keep the ACKs coming
//     back one by one (a datagram that starts with an ACK always may).
//   - Never on an unproven connection (the anti-amplification budget
//     counts datagrams: amplification.go), never for a packet whose
//     payload went out by reference (NextPacketScatter).
//
// The receiver validates the whole framing before it hands any inner
// packet to the per-packet path, so a malformed datagram is dropped whole
// (EndpointCounters.Malformed); a well-formed one counts once in
// EndpointCounters.RxCoalesced and its packets count as packets.

// CoalesceMark is the first byte of a coalesced datagram.
const CoalesceMark = 0xC2

// CoalesceLenLen is the size of the length before each inner packet.
const CoalesceLenLen = 2

// minInnerLen is the shortest inner packet: a header and a CRC32C.
const minInnerLen = HeaderLen + CRCLen

// coalesceState is what NextPacket leaves for NextCoalesced: the
// connection and path of the datagram just built (c nil when it cannot
// take follow-ons).
type coalesceState struct {
	c    *Conn
	path verbs.PathID
	// building is set while a follow-on is being built, and cap is then
	// the largest payload it may carry; otherwise buildNew picks paths
	// and sizes as usual.
	building bool
	cap      int
}

// coalesceBacklog is the fewest packets a connection must have in flight
// before a datagram that starts with data may take follow-ons. Below it
// the connection is bound by round trips, not by frames: a window of 8
// small messages sent as 8 datagrams keeps both ends busy while the ACKs
// come back one by one, where one datagram of 8 makes each round a stop
// and wait (the udp backend over loopback, 64 B SENDs, 8 outstanding:
// about half the messages/s with coalescing). A datagram that starts
// with an ACK takes follow-ons whatever the backlog: the ACK was not
// pipelined data (a ping-pong's answer rides with the ACK of the request).
const coalesceBacklog = 8

// roundTripBound reports whether a datagram whose first packet took the
// connection's packets in flight from before to after started with data
// (it was sequenced) on a window shorter than coalesceBacklog: such a
// datagram takes no follow-ons.
func roundTripBound(before, after int) bool {
	return after > before && before < coalesceBacklog
}

// coalescedCount returns the number of packets the coalesced datagram d
// (d[0] == CoalesceMark) carries, or 0 when its framing is malformed: a
// length that runs past the end, an inner packet shorter than a header and
// CRC, one that is itself coalesced, or fewer than two packets (a sender
// coalesces only to add one).
func coalescedCount(d []byte) int {
	n := 0
	for off := 1; off < len(d); n++ {
		var pkt []byte
		if pkt, off = innerAt(d, off); pkt == nil {
			return 0
		}
	}
	if n < 2 {
		return 0
	}
	return n
}

// innerAt returns the inner packet whose length is at d[off:] and the
// offset after it, or nil when the framing breaks there: the length runs
// past the end or is cut short, the packet is shorter than a header and
// CRC, or it is itself coalesced. Every walk of the framing steps with it.
func innerAt(d []byte, off int) (pkt []byte, next int) {
	if len(d)-off < CoalesceLenLen {
		return nil, len(d)
	}
	l := int(binary.BigEndian.Uint16(d[off:]))
	off += CoalesceLenLen
	if l < minInnerLen || l > len(d)-off || d[off] == CoalesceMark {
		return nil, len(d)
	}
	return d[off : off+l : off+l], off + l
}

// DatagramPackets returns how many packets the datagram d holds for
// Receive: the count of a coalesced datagram whose framing is well formed,
// and 1 for anything else (a lone packet, or a malformed framing, which
// Receive drops whole). The datagram's length is not checked (Receive
// drops one over MaxPacketLen whole too). An engine weighs its receive
// bursts with it (dpdk.ack_flush counts packets, not frames). It walks
// only the framing's length chain, at most len(d)/38 steps.
func (e *Endpoint) DatagramPackets(d []byte) int {
	if len(d) == 0 || d[0] != CoalesceMark {
		return 1
	}
	return max(1, coalescedCount(d))
}

// receiveCoalesced splits a coalesced datagram and receives its packets
// in order, all with the datagram's rx (its CE mark applies to each).
func (e *Endpoint) receiveCoalesced(now verbs.Time, d []byte, rx verbs.RxMeta) {
	if len(d) > e.MaxPacketLen() || coalescedCount(d) == 0 {
		e.c.RxPackets++
		e.c.Malformed++
		return
	}
	e.c.RxCoalesced++
	for off := 1; off < len(d); {
		var pkt []byte
		pkt, off = innerAt(d, off) // never nil: coalescedCount walked it
		e.receiveOne(now, pkt, rx)
	}
}

// NextCoalesced appends the connection's next packet to the datagram
// dgram[:n] that NextPacket (or NextPacketScatter, with sc.Payload nil)
// has just written at the start of dgram, when the rules above let one
// go in it and it fits. It returns the datagram's TxMeta, its Len now the
// whole datagram's, and false when nothing was added (dgram[:n] is then
// unchanged). The caller may call it again while it returns true; any
// other call on the endpoint ends the datagram. The first append turns
// the packet into a coalesced datagram in place (the packet moves 3 bytes
// on). dgram is the caller's whole buffer; the endpoint keeps no reference
// to it.
func (e *Endpoint) NextCoalesced(now verbs.Time, dgram []byte, n int) (verbs.TxMeta, bool) {
	c := e.coal.c
	if c == nil || !c.coalescible(now) {
		return verbs.TxMeta{}, false
	}
	first := len(dgram) > 0 && dgram[0] != CoalesceMark
	at := n + CoalesceLenLen // where the new packet goes
	if first {
		at += 1 + CoalesceLenLen
	}
	limit := min(len(dgram), c.maxPacketLen())
	payload := limit - at - HeaderLen - MaxMsgHeaderLen - e.sec.trailer
	if payload < 0 || n > limit {
		return verbs.TxMeta{}, false
	}
	e.coal.building, e.coal.cap = true, payload
	meta, ok := c.buildNew(now, dgram[at:limit])
	e.coal.building = false
	if !ok {
		return verbs.TxMeta{}, false
	}
	e.touch(c, now)
	c.c.TxCoalesced++
	binary.BigEndian.PutUint16(dgram[at-CoalesceLenLen:], uint16(meta.Len))
	if first {
		copy(dgram[1+CoalesceLenLen:], dgram[:n]) // memmove: the ranges overlap
		dgram[0] = CoalesceMark
		binary.BigEndian.PutUint16(dgram[1:], uint16(n))
	}
	meta.Len += at
	return meta, true
}

// coalescible reports whether NextPacket would build new data for c now,
// and only that (the rules in the comment at the top).
func (c *Conn) coalescible(now verbs.Time) bool {
	if c.state != connEstablished || c.halfOpen.in || c.ctrl.Len() > 0 ||
		c.resend.Len() > 0 || c.moved.Len() > 0 {
		return false
	}
	if c.ackList.Len() > 0 && c.ackDueNow(now) {
		return false
	}
	return !c.limit.paced(now)
}

// coalescePath is the path of a follow-on: the datagram's, if it has room
// for one more packet; -1 otherwise.
func (c *Conn) coalescePath() int {
	pi := int(c.ep.coal.path)
	if pi >= len(c.tx) || pathWeight(&c.tx[pi]) == 0 {
		return -1
	}
	return pi
}

// coalesceFits reports whether a chunk of n payload bytes may be built
// now: always, outside NextCoalesced.
func (c *Conn) coalesceFits(n uint32) bool {
	return !c.ep.coal.building || int(n) <= c.ep.coal.cap
}

// maxPacketLen is the longest packet of the connection: both ends accept
// it, whichever MTU each was configured with (c.mtu is the smaller).
func (c *Conn) maxPacketLen() int {
	return HeaderLen + MaxMsgHeaderLen + c.mtu + c.ep.sec.trailer
}
