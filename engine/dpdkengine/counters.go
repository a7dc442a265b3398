//go:build dpdk

package dpdkengine

// Counters are one shard's data-path counters. The shard goroutine writes
// them; other goroutines get a copy through Shard.Counters (exact, through
// Do) or Shard.Stats (at most publishEvery old, never waits).
type Counters struct {
	RxFrames        uint64 // frames taken from the port
	RxBytes         uint64 // their bytes (whole Ethernet frames)
	RxCE            uint64 // payloads delivered with ECN Congestion Experienced
	RxDelivered     uint64 // UDP payloads handed to the transport core
	RxNoUDPChecksum uint64 // of those, datagrams with UDP checksum 0 (not verified: the core's CRC covers them)
	Drops           [dropKinds]uint64
	Reordered       uint64 // packets held back behind later ones by the impairment stage
	TxFrames        uint64 // frames the port accepted
	TxBytes         uint64 // their bytes (whole Ethernet frames)
	TxNoMbuf        uint64 // times the pool had no mbufs for a tx burst
	TxBlocked       uint64 // loop iterations that produced nothing because the port's queue was full
	NoNeighbour     uint64 // packets the core produced for a peer without a MAC yet (dropped; the core resends)
	ARPRequestsSent uint64
	ARPRepliesSent  uint64
	ARPLearned      uint64
	Loops           uint64 // loop iterations
	IdleSleeps      uint64 // times the loop slept for lack of work
	// DriverCalls: cgo calls into DPDK on the data path (one driver call
	// per port per iteration that transmits, frees and receives; mbuf
	// allocations and frees outside it; ring bursts with an lcore loop).
	DriverCalls uint64
	RxPolls     uint64 // receive polls, those made while waiting in a driver call included
	IdleWaits   uint64 // driver calls that waited for a frame (Config.IdlePoll)
	// CatchUpPolls: extra receive polls made before due timers fired,
	// after a full burst or a long step (shard.go catchUp).
	CatchUpPolls uint64
	// AckFlushes: sends made in the middle of a receive burst, once
	// Config.AckFlush packets of it were handled (shard.go flushMidBurst).
	AckFlushes uint64
	// Coalesced: packets sent as follow-ons in another packet's frame
	// (Config.Coalesce, coalesce.go).
	Coalesced uint64
	// Commands: functions other goroutines handed to the shard (Do; a
	// RunApp hands in one, to install its app, however long it runs).
	Commands uint64
	// ZeroCopySent: data packets sent with their payload attached from
	// the registered region (zero-copy TX); ZeroCopyFallback: packets
	// that qualified (payload >= zero_copy_min) but were copied, by
	// reason; ZeroCopyInFlight: payloads the driver still held at the
	// last publish (0 once a stopped shard's queues are drained).
	ZeroCopySent     uint64
	ZeroCopyFallback [zcReasons]uint64
	ZeroCopyInFlight uint64
	// Time is the loop's wall time by phase (rx, core, tx, app, idle;
	// timesplit.go): it sums to the time the loop has run, up to the
	// iteration in progress.
	Time TimeSplit
}

// Dropped is the total of all drop reasons.
func (c *Counters) Dropped() uint64 {
	var t uint64
	for _, v := range c.Drops {
		t += v
	}
	return t
}

// DropMap returns the non-zero drop counters by name.
func (c *Counters) DropMap() map[string]uint64 {
	m := map[string]uint64{}
	for i, v := range c.Drops {
		if v != 0 {
			m[Drop(i).String()] = v
		}
	}
	return m
}

// ZCReason is why a packet that qualified for zero-copy TX was copied.
type ZCReason int

const (
	ZCNotDPDKMemory ZCReason = iota // the payload is not in a live DPDK-memory region (mempool.RegionOf)
	ZCNoSlot                        // every zero_copy_slots slot was lent out
	ZCNoMbuf                        // the pool had no mbufs for the extra segments
	zcReasons
)

func (r ZCReason) String() string {
	return [...]string{"not_dpdk_memory", "no_slot", "no_mbuf"}[r]
}
