//go:build dpdk

package dpdkengine

import "github.com/metaroce/metaroce/verbs"

// coalescer is a transport core that can append packets to a datagram it
// has just built (metaroce.Endpoint.NextCoalesced).
type coalescer interface {
	NextCoalesced(now verbs.Time, dgram []byte, n int) (verbs.TxMeta, bool)
}

// Coalescing. With dpdk.coalesce above 1, every frame the core builds
// whole (not a zero-copy one) may take up to coalesce-1 more packets of
// the same connection, new data on the same path, up to the connection's
// largest packet (metaroce/coalesce.go states which packets and why).
// Where a frame costs the sending core more than its bytes (af_packet
// over a veth: the kernel's sendto runs the peer's receive path too),
// 64-byte messages then share frames instead of paying a frame each. It
// costs one call into the core per follow-on, in Go (no cgo), and one
// more that finds nothing when a frame is not full.

// setupCoalesce turns coalescing on when the configuration asks for it,
// or leaves it to the shard (0) and a port is af_packet, and the
// transport can coalesce.
func (s *Shard) setupCoalesce(cfg Config) {
	n := cfg.Coalesce
	if n == 0 {
		n = 1
		for _, p := range s.ports {
			if p.afPacket {
				n = AutoCoalesce
			}
		}
	}
	if n <= 1 {
		return
	}
	if c, ok := s.tr.(coalescer); ok {
		s.coal, s.coalesce = c, n
	}
}

// coalesceInto appends follow-ons to the frame whose datagram the core has
// just written into m (meta), and returns the datagram's TxMeta.
func (s *Shard) coalesceInto(now verbs.Time, dgram []byte, meta verbs.TxMeta) verbs.TxMeta {
	for k := 1; k < s.coalesce; k++ {
		more, ok := s.coal.NextCoalesced(now, dgram, meta.Len)
		if !ok {
			break
		}
		s.c.Coalesced++
		meta = more
	}
	return meta
}
