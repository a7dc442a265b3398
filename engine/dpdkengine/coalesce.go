//go:build dpdk

package dpdkengine

import (
	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/verbs"
)

// weigher is a transport core that says how many packets a datagram
// holds for Receive (metaroce.Endpoint.DatagramPackets): ack_flush counts
// packets, so a peer's coalesced frames do not hold the mid-burst ACK back
// (eight 64-byte messages in a frame would make 16 frames 128 messages).
type weigher interface {
	DatagramPackets(d []byte) int
}

// Coalescing. With dpdk.coalesce above 1, every frame the core builds
// whole (not a zero-copy one) may take up to coalesce-1 more packets of
// the same connection, new data on the same path, up to the connection's
// largest packet (metaroce/coalesce.go states which packets and why).
// Where a frame costs the sending core more than its bytes (af_packet
// over a veth: the kernel's sendto runs the peer's receive path too),
// 64-byte messages then share frames instead of paying a frame each. Over
// memif each frame has its own cost too (an mbuf, its headers and their
// checksum, a ring slot, the receiver's parse), which they then share
// (docs/dpdk.md has the figures for both). It costs one call into the
// core per follow-on, in Go (no cgo), and one more that finds nothing
// when a frame is not full (engine.Coalesce).

// setupCoalesce turns coalescing on when the configuration asks for it,
// or leaves it to the shard (0: engine.AutoCoalesce), and the transport can
// coalesce.
func (s *Shard) setupCoalesce(cfg Config) {
	if w, ok := s.tr.(weigher); ok {
		s.weigh = w.DatagramPackets // whatever we send: the peer may coalesce
	}
	n := cfg.Coalesce
	if n == 0 {
		n = engine.AutoCoalesce
	}
	if n <= 1 {
		return
	}
	if c, ok := s.tr.(engine.Coalescer); ok {
		s.coal, s.coalesce = c, n
	}
}

// coalesceInto appends follow-ons to the frame whose datagram the core has
// just written into m (meta), and returns the datagram's TxMeta.
func (s *Shard) coalesceInto(now verbs.Time, dgram []byte, meta verbs.TxMeta) verbs.TxMeta {
	meta, k := engine.Coalesce(s.coal, now, dgram, meta, s.coalesce)
	s.c.Coalesced += uint64(k)
	return meta
}
