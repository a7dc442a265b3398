package engine

import "time"

// Stats counts what a backend did, in the same terms for every backend.
// A counter a backend cannot observe stays 0 (the kernel's socket-buffer
// drops exist only for udp, say); the implementation says which.
type Stats struct {
	// TxPackets and TxBytes: packets the medium accepted and their bytes
	// as the medium counts them (udp and mempair: the transport's packet,
	// the UDP payload; dpdk: whole Ethernet frames, ARP included).
	TxPackets, TxBytes uint64
	// TxErrors: packets the transport produced that could not be sent
	// (the kernel refused them; no neighbour MAC yet). Not resent by the
	// backend: the transport's own recovery resends them.
	TxErrors uint64
	// RxPackets and RxBytes: packets taken from the medium and their
	// bytes, counted as TxBytes is.
	RxPackets, RxBytes uint64
	// RxCE: arrivals whose IP header carried ECN Congestion Experienced.
	RxCE uint64
	// RxInjectedDrops: arrivals the impairment stage dropped.
	RxInjectedDrops uint64
	// RxUnknownPeer: arrivals from an address no peer has.
	RxUnknownPeer uint64
	// RxTruncated: datagrams longer than the transport's MaxPacketLen.
	RxTruncated uint64
	// RxKernelDrops: datagrams the kernel dropped for a full socket
	// buffer, as last reported (udp: SO_RXQ_OVFL), or frames it dropped
	// for a full af_packet receive ring (dpdk: PACKET_STATISTICS).
	RxKernelDrops uint64
	// RxOtherDrops: arrivals dropped for any other reason (not IPv4, not
	// addressed to us, a bad checksum).
	RxOtherDrops uint64
	// Loop is where the backend's data-path loop spent its wall time, for
	// backends whose loop measures it (dpdk: the shard's); Measured is
	// false elsewhere.
	Loop LoopTime
	// DriverCalls: calls from the loop into the medium's driver on the
	// data path (dpdk: cgo calls into DPDK), and RxPolls: receive polls
	// (dpdk: a driver call that waits for a frame polls many times). 0
	// where the backend does not count them.
	DriverCalls, RxPolls uint64
	// ZeroCopy says the backend sends large payloads by reference from
	// the registered region (dpdk with zero_copy_min); ZeroCopySent is
	// the packets it sent so, ZeroCopyFallback*: packets that qualified
	// and were copied, because the payload was not in DPDK memory, every
	// slot was lent out, or the pool had no mbufs for the extra segments.
	ZeroCopy                                                              bool
	ZeroCopySent                                                          uint64
	ZeroCopyFallbackMemory, ZeroCopyFallbackSlots, ZeroCopyFallbackNoMbuf uint64
}

// LoopTime splits a data-path loop's wall time: receive bursts and
// parsing (Rx), the transport core (Core), headers and transmit bursts
// (Tx), the application's step on the loop (App), and iterations without
// work, sleeps and yields (Idle). The parts sum to the loop's running time.
type LoopTime struct {
	Measured                bool
	Rx, Core, Tx, App, Idle time.Duration
}
