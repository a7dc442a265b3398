package udp

import (
	"sync/atomic"

	"github.com/metaroce/metaroce/engine"
)

// counters counts what a Backend did. Every field is updated once per
// batch by the Backend's goroutine and may be read from any goroutine
// (Backend.Stats).
type counters struct {
	TxPackets, TxBytes atomic.Uint64
	// TxErrors: packets the kernel refused to send (counted, not resent:
	// the transport's own recovery resends them).
	TxErrors           atomic.Uint64
	RxPackets, RxBytes atomic.Uint64
	// RxCE: arrivals whose IP header carried ECN Congestion Experienced.
	RxCE atomic.Uint64
	// RxInjectedDrops: arrivals the impairment stage dropped (Config.Loss).
	RxInjectedDrops atomic.Uint64
	// RxUnknownPeer: arrivals from an address no AddPeer named.
	RxUnknownPeer atomic.Uint64
	// RxTruncated: datagrams longer than the transport's MaxPacketLen.
	RxTruncated atomic.Uint64
	// RxKernelDrops: datagrams the kernel dropped because the receive
	// socket's buffer was full (SO_RXQ_OVFL), as last reported.
	RxKernelDrops atomic.Uint64
	// PortFallbacks: send sockets that could not bind their exact source
	// port and got a kernel-chosen one instead.
	PortFallbacks atomic.Uint64
	// PortsShared: packets sent from another path's socket because
	// MaxSourcePorts sockets were already open.
	PortsShared atomic.Uint64
}

// snapshot is the counters in engine terms (every counter but the two
// send-socket ones, which SocketStats reports).
func (c *counters) snapshot() engine.Stats {
	return engine.Stats{TxPackets: c.TxPackets.Load(), TxBytes: c.TxBytes.Load(), TxErrors: c.TxErrors.Load(),
		RxPackets: c.RxPackets.Load(), RxBytes: c.RxBytes.Load(), RxCE: c.RxCE.Load(),
		RxInjectedDrops: c.RxInjectedDrops.Load(), RxUnknownPeer: c.RxUnknownPeer.Load(),
		RxTruncated: c.RxTruncated.Load(), RxKernelDrops: c.RxKernelDrops.Load()}
}

// SocketStats is what the UDP backend alone counts about its send sockets.
type SocketStats struct {
	// PortFallbacks: send sockets that could not bind their exact source
	// port and got a kernel-chosen one instead.
	PortFallbacks uint64
	// PortsShared: packets sent from another path's socket because
	// MaxSourcePorts sockets were already open.
	PortsShared uint64
}

// SocketStats is a copy of the send-socket counters; any goroutine may
// call it.
func (b *Backend) SocketStats() SocketStats {
	return SocketStats{PortFallbacks: b.stats.PortFallbacks.Load(), PortsShared: b.stats.PortsShared.Load()}
}
