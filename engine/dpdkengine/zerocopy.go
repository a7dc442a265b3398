//go:build dpdk

package dpdkengine

import (
	"fmt"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// scatterer is a transport core that can hand a data payload out by
// reference (metaroce.Endpoint.NextPacketScatter).
type scatterer interface {
	NextPacketScatter(now verbs.Time, buf []byte, minPayload int, sc *metaroce.Scatter) (verbs.TxMeta, bool)
}

// Zero-copy TX. With dpdk.zero_copy_min > 0 the shard asks the core for
// the scatter form of each packet: a data payload of at least that many
// bytes is not copied into the mbuf but stays where the application
// registered it. The packet then goes out as a chain of three segments:
// the mbuf with the headers, an mbuf attached to the payload as an
// external buffer (mempool.ExtTX), and a small mbuf with the CRC32C
// trailer. The attach and chaining of a whole burst is one cgo call
// (zeroCopyFlush), next to the burst's driver call.
//
// Lifetime (metaroce/scatter.go states the core's side): the payload must
// stay mapped until the driver frees the external buffer. Only a payload
// in a live DPDK-memory region (mempool.RegionOf) is lent, and the region
// counts what it lent: Region.Free stops lending and waits for the
// driver first. Anything else (memory outside DPDK's: rte_mem_virt2iova
// of it would be wrong; all slots lent; no mbufs for the extra segments)
// is copied into the header mbuf, and counted by reason
// (Counters.ZeroCopyFallback).
//
// Zero-copy is off on a shard whose transport cannot scatter, whose ports
// do not all take chained mbufs (RTE_ETH_TX_OFFLOAD_MULTI_SEGS), or that
// computes UDP checksums in software (which would need the payload next
// to the headers): use udp_checksum: zero, or a port with the offload.

// zeroCopyUsable reports whether port info allows zero-copy TX.
func zeroCopyUsable(p *port) bool { return p.multiSeg && !p.udpSoft }

// setupZeroCopy turns zero-copy on when the configuration asks for it and
// the transport and every port allow it.
func (s *Shard) setupZeroCopy(cfg Config) error {
	if cfg.ZeroCopyMin <= 0 {
		return nil
	}
	sc, ok := s.tr.(scatterer)
	if !ok {
		return nil
	}
	for _, p := range s.ports {
		if !zeroCopyUsable(p) {
			return nil
		}
	}
	x, err := mempool.NewExtTX(cfg.ZeroCopySlots)
	if err != nil {
		return fmt.Errorf("dpdk engine: zero-copy slots: %w", err)
	}
	s.ext, s.scat, s.zcMin, s.zcOn = x, sc, max(cfg.ZeroCopyMin, 1), true
	s.scats = make([]metaroce.Scatter, cfg.Burst)
	return nil
}

// ZeroCopy reports whether the shard sends large payloads by reference.
// Safe from any goroutine (fixed when the shard is made).
func (s *Shard) ZeroCopy() bool { return s.zcOn }

// takeSpare pops a spare mbuf, refilling the spares when empty (a counted
// driver call); nil when the pool is empty.
func (s *Shard) takeSpare() *dpdk.Mbuf {
	if len(s.spare) == 0 {
		s.spare = s.spare[:s.burst]
		s.c.DriverCalls++
		if err := s.e.pool.AllocBulk(s.spare); err != nil {
			s.spare = s.spare[:0]
			return nil
		}
	}
	m := s.spare[len(s.spare)-1]
	s.spare = s.spare[:len(s.spare)-1]
	return m
}

// zeroCopy finishes head, whose headers (sc.HdrLen bytes of the core's
// packet after our HdrLen) are written and whose length is the whole
// frame's: it queues the payload's attach and the trailer segment for
// zeroCopyFlush, or copies the payload and trailer in after the headers
// when it cannot.
func (s *Shard) zeroCopy(head *dpdk.Mbuf, sc *metaroce.Scatter) {
	if reason, ok := s.lend(head, sc); ok {
		s.c.ZeroCopySent++
	} else {
		s.c.ZeroCopyFallback[reason]++
		room := head.Room()[HdrLen+sc.HdrLen:]
		n := copy(room, sc.Payload)
		copy(room[n:], sc.Trailer[:])
	}
	sc.Payload = nil
}

// lend chains sc's payload to head as an external buffer, with a trailer
// segment after it (zeroCopy). When it cannot it says why, and head and
// the spares are as they were.
func (s *Shard) lend(head *dpdk.Mbuf, sc *metaroce.Scatter) (ZCReason, bool) {
	r := mempool.RegionOf(sc.Payload)
	if r == nil {
		return ZCNotDPDKMemory, false
	}
	s.ext.ReclaimOrdered()
	if s.ext.FreeSlots() == 0 {
		return ZCNoSlot, false
	}
	pay := s.takeSpare()
	if pay == nil {
		return ZCNoMbuf, false
	}
	tr := s.takeSpare()
	if tr == nil {
		s.spare = append(s.spare, pay)
		return ZCNoMbuf, false
	}
	copy(tr.Room(), sc.Trailer[:])
	tr.SetLen(metaroce.CRCLen)
	head.SetLen(HdrLen + sc.HdrLen)
	if s.ext.Chain(head, pay, tr, sc.Payload, r) {
		return 0, true
	}
	// The region began to be freed after RegionOf found it.
	head.SetLen(HdrLen + sc.HdrLen + len(sc.Payload) + metaroce.CRCLen)
	s.spare = append(s.spare, tr, pay)
	return ZCNotDPDKMemory, false
}

// zeroCopyFlush attaches and chains the burst's zero-copy packets (one
// cgo call, counted).
func (s *Shard) zeroCopyFlush() {
	if s.ext.Flush() {
		s.c.DriverCalls++
	}
}

// closeZeroCopy runs after the shard has drained its queues: it reclaims
// what the driver has freed and frees the slots if none is held any more
// (else they stay allocated: the driver's free callback still writes
// them).
func (s *Shard) closeZeroCopy() {
	if s.ext == nil {
		return
	}
	s.c.ZeroCopyInFlight = uint64(s.ext.Reclaim())
	if s.c.ZeroCopyInFlight == 0 {
		_ = s.ext.Free()
	}
	s.ext = nil
}
