// Package metrics exposes a running metaroce instance's counters to
// Prometheus: metaroce_* names, counters ending in _total, base units
// (bytes, seconds), labels bounded in number (transport: 2 values; conn:
// at most MaxConns per transport; path: at most MaxPaths per connection;
// reason: a fixed set per family, listed in the README).
//
// The engine goroutine owns the counters; it hands copies to a Collector
// (SetConns, SetEndpoint) and the Collector serves the latest copy to scrapes, so a
// scrape never races with the data path.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label bounds.
const (
	MaxConns = 64
	MaxPaths = 256
)

// Backend is a copy of the data path's counters.
type Backend struct {
	TxPackets, TxBytes, TxErrors                uint64
	RxPackets, RxBytes, RxCE                    uint64
	RxInjectedDrops, RxUnknownPeer, RxTruncated uint64
	RxKernelDrops, RxOtherDrops                 uint64
	// LoopSeconds is the data-path loop's wall time by phase (rx, core,
	// tx, app, idle), for backends that measure it; empty elsewhere, so
	// that no backend shows a misleading 0.
	LoopSeconds []Seconds
	// ZeroCopySent and ZeroCopyFallbacks (reasons not_dpdk_memory,
	// no_slot, no_mbuf), for a backend that sends payloads by reference;
	// ZeroCopyFallbacks is empty elsewhere, and neither is exported then.
	ZeroCopySent      uint64
	ZeroCopyFallbacks []Count
}

// Seconds is one phase's share of a loop's time.
type Seconds struct {
	Phase string
	S     float64
}

// Count is one reason's counter of a labelled family: the transport's
// snapshot says which reasons it has, so a reason one transport cannot
// see is absent rather than a misleading 0. Reasons are fixed strings
// (bounded label values).
type Count struct {
	Reason string
	N      uint64
}

// Endpoint is a copy of a transport endpoint's counters of packets it
// received and dropped before (or without) finding their connection.
type Endpoint struct {
	RxDropped []Count // reasons crc, malformed, unknown_conn
	// ConnectsRefused: connection requests (metaroce CONNECT, rocev2 CM
	// REQ) the endpoint refused, by reason (max_conns, per_peer,
	// backlog, not_accepting). Resets: RESETs the endpoint would send
	// (to a packet naming no connection, a refused CONNECT), by outcome
	// (sent, rate_limited). ConnsFailed: connections the endpoint ended
	// by itself, by reason (half_open_evicted: unproven, dropped to make
	// room; peer_restart: the peer came back with a new incarnation).
	ConnectsRefused, Resets, ConnsFailed []Count
	// RxCoalesced: well-formed coalesced datagrams received (metaroce;
	// their packets count one by one wherever they go).
	RxCoalesced uint64
}

// Conn is a copy of one connection's (metaroce) or QP's (rocev2) counters.
type Conn struct {
	ID                               string
	TxPackets, TxBytes, RxPackets    uint64
	RxBytes, DataPackets, DataResent uint64
	PayloadPlaced, PathFailures      uint64
	RNRRetries, Messages             uint64
	MessagesReceived, CRCDrops       uint64
	Timeouts, Retries                uint64
	// SpuriousTimeouts: tail-loss timeouts a later ACK proved spurious
	// (metaroce: the packets were late, not lost).
	SpuriousTimeouts uint64
	// CopiesCancelled: copies moved off a path and not sent, the
	// original's ACK having come first. LastChunksHeld: WRITE last
	// chunks that came before the rest and were placed last (metaroce).
	CopiesCancelled, LastChunksHeld uint64
	// KeyUpdates: key epochs the connection moved to, both directions
	// (metaroce in security.mode auth or encrypt; 0 in none).
	KeyUpdates uint64
	// TxCoalesced: packets sent appended to another's datagram
	// (metaroce, dpdk.coalesce), among TxPackets.
	TxCoalesced uint64
	// RateHintBps is the rate the peer asks this side to send at (0: no
	// hint, not paced); Inflight its sequenced packets not yet acknowledged.
	RateHintBps float64
	Inflight    int
	// RxDropped: packets of this connection received and not placed (or
	// not acted on), by reason (crc, malformed, duplicate,
	// stale_generation, ...). TxExtra: packets sent beyond the data's
	// first transmissions and the resends DataResent counts (probe: tail
	// and re-probe NOPs; moved: copies moved off a failed or timed-out
	// path).
	RxDropped, TxExtra []Count
	Paths              []Path
}

// Path is a copy of one metaroce path's counters and state.
type Path struct {
	TxPackets, TxBytes, RxPackets     uint64
	RetransmitSACK, RetransmitTimeout uint64
	CEReceived, Failures              uint64
	SRTT                              time.Duration
	Failed                            bool
	Window                            int // congestion window, packets
	Restores, Rerolls                 uint64
}

// Collector is a prometheus.Collector over the latest copies.
type Collector struct {
	mu        sync.Mutex
	backends  map[string]func() Backend
	conns     map[string][]Conn
	endpoints map[string]Endpoint
}

// NewCollector returns an empty collector.
func NewCollector() *Collector {
	return &Collector{backends: map[string]func() Backend{}, conns: map[string][]Conn{}, endpoints: map[string]Endpoint{}}
}

// SetBackend registers the function that reads a transport's backend
// counters (they must be safe to read from any goroutine).
func (c *Collector) SetBackend(transport string, f func() Backend) {
	c.mu.Lock()
	c.backends[transport] = f
	c.mu.Unlock()
}

// SetConns replaces the copy of a transport's connection counters.
func (c *Collector) SetConns(transport string, conns []Conn) {
	if len(conns) > MaxConns {
		conns = conns[:MaxConns]
	}
	c.mu.Lock()
	c.conns[transport] = conns
	c.mu.Unlock()
}

// SetEndpoint replaces the copy of a transport endpoint's counters.
func (c *Collector) SetEndpoint(transport string, e Endpoint) {
	c.mu.Lock()
	c.endpoints[transport] = e
	c.mu.Unlock()
}

type desc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType
}

func counter(name, help string, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue}
}

func gauge(name, help string, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue}
}

var (
	bTxPackets = counter("metaroce_backend_tx_packets_total", "Datagrams the backend sent.", "transport")
	bTxBytes   = counter("metaroce_backend_tx_bytes_total", "UDP payload bytes the backend sent.", "transport")
	bTxErrors  = counter("metaroce_backend_tx_errors_total", "Datagrams the kernel refused to send.", "transport")
	bRxPackets = counter("metaroce_backend_rx_packets_total", "Datagrams the backend received.", "transport")
	bRxBytes   = counter("metaroce_backend_rx_bytes_total", "UDP payload bytes the backend received.", "transport")
	bRxCE      = counter("metaroce_backend_rx_ce_total", "Datagrams received with ECN Congestion Experienced.", "transport")
	bRxDrop    = counter("metaroce_backend_rx_dropped_total", "Datagrams received and dropped before the transport, by reason.", "transport", "reason")
	bZCSent    = counter("metaroce_backend_zero_copy_packets_total", "Data packets sent with their payload attached from the registered region instead of copied (dpdk zero_copy_min).", "transport")
	bZCFall    = counter("metaroce_backend_zero_copy_fallbacks_total", "Packets that qualified for zero-copy TX and were copied, by reason (not_dpdk_memory, no_slot, no_mbuf).", "transport", "reason")
	bLoop      = counter("metaroce_backend_loop_seconds_total", "Wall time of the backend's data-path loop by phase: rx (receive bursts, parsing), core (the transport), tx (headers, transmit bursts), app (the application's step), idle. Only backends that measure it (dpdk).", "transport", "phase")

	eRxDrop  = counter("metaroce_endpoint_rx_dropped_total", "Packets the transport endpoint dropped before finding a connection (crc counts every CRC failure), by reason.", "transport", "reason")
	eRefused = counter("metaroce_endpoint_connects_refused_total", "Connection requests the transport endpoint refused, by reason.", "transport", "reason")
	eResets  = counter("metaroce_endpoint_resets_total", "RESETs the transport endpoint would send, by outcome (sent; rate_limited, which counts the repeated CLOSE_ACKs sharing their limit too).", "transport", "outcome")
	eFailed  = counter("metaroce_endpoint_conns_failed_total", "Connections the transport endpoint ended by itself, by reason.", "transport", "reason")
	eRxCoal  = counter("metaroce_endpoint_rx_coalesced_datagrams_total", "Coalesced datagrams received well formed; their packets count one by one (metaroce).", "transport")
	cRxDrop  = counter("metaroce_conn_rx_dropped_total", "Packets of a connection received and not placed, by reason.", "transport", "conn", "reason")
	cTxXtra  = counter("metaroce_conn_tx_extra_packets_total", "Packets a connection sent beyond first transmissions and data resends, by reason.", "transport", "conn", "reason")

	cTx       = counter("metaroce_conn_tx_packets_total", "Packets a connection sent.", "transport", "conn")
	cTxBytes  = counter("metaroce_conn_tx_bytes_total", "Bytes a connection sent.", "transport", "conn")
	cRx       = counter("metaroce_conn_rx_packets_total", "Packets a connection accepted.", "transport", "conn")
	cRxBytes  = counter("metaroce_conn_rx_bytes_total", "Bytes a connection accepted.", "transport", "conn")
	cData     = counter("metaroce_conn_data_packets_total", "Data packets sent for the first time.", "transport", "conn")
	cResent   = counter("metaroce_conn_data_resent_total", "Data packets sent again.", "transport", "conn")
	cPlaced   = counter("metaroce_conn_payload_placed_bytes_total", "Payload bytes placed in memory.", "transport", "conn")
	cPathFail = counter("metaroce_conn_path_failures_total", "Paths judged failed.", "transport", "conn")
	cTimeouts = counter("metaroce_conn_timeouts_total", "Local ACK timeouts (rocev2).", "transport", "conn")
	cRetries  = counter("metaroce_conn_retries_total", "Go-back-N episodes (rocev2).", "transport", "conn")
	cMsgs     = counter("metaroce_conn_messages_sent_total", "Messages sent (metaroce).", "transport", "conn")
	cSpurious = counter("metaroce_conn_spurious_timeouts_total", "Tail-loss timeouts a later ACK proved spurious (metaroce).", "transport", "conn")
	cCancel   = counter("metaroce_conn_copies_cancelled_total", "Copies moved off a path and not sent: the original's ACK came first (metaroce).", "transport", "conn")
	cHeld     = counter("metaroce_conn_last_chunks_held_total", "WRITE last chunks that came before the rest and were placed last (metaroce).", "transport", "conn")
	cKeyUpd   = counter("metaroce_conn_key_updates_total", "Key epochs moved to, both directions (metaroce, security.mode auth or encrypt).", "transport", "conn")
	cTxCoal   = counter("metaroce_conn_tx_coalesced_packets_total", "Packets sent appended to another packet's datagram (metaroce, dpdk.coalesce).", "transport", "conn")

	pTx      = counter("metaroce_path_tx_packets_total", "Sequenced packets a path sent.", "transport", "conn", "path")
	pTxBytes = counter("metaroce_path_tx_bytes_total", "Payload bytes a path sent.", "transport", "conn", "path")
	pRx      = counter("metaroce_path_rx_packets_total", "Sequenced packets a path accepted.", "transport", "conn", "path")
	pRetx    = counter("metaroce_path_retransmits_total", "Packets a path resent, by cause.", "transport", "conn", "path", "cause")
	pCE      = counter("metaroce_path_ce_received_total", "CE-marked packets received on a path.", "transport", "conn", "path")
	pFail    = counter("metaroce_path_failures_total", "Times a path was judged failed.", "transport", "conn", "path")
	pSRTT    = gauge("metaroce_path_srtt_seconds", "A path's smoothed round-trip time.", "transport", "conn", "path")
	pFailed  = gauge("metaroce_path_failed", "1 while a path is judged failed.", "transport", "conn", "path")
	pWindow  = gauge("metaroce_path_window_packets", "A path's congestion window.", "transport", "conn", "path")
	pRestore = counter("metaroce_path_restores_total", "Times a failed path came back after a probe.", "transport", "conn", "path")
	pReroll  = counter("metaroce_path_rerolls_total", "Times a path took a new entropy (source port).", "transport", "conn", "path")
	cHint    = gauge("metaroce_conn_rate_hint_bytes_per_second", "The rate the peer's last ACK asked for (0: none).", "transport", "conn")
	cInfl    = gauge("metaroce_conn_inflight_packets", "Sequenced packets not yet acknowledged.", "transport", "conn")
)

var all = []desc{bTxPackets, bTxBytes, bTxErrors, bRxPackets, bRxBytes, bRxCE, bRxDrop, bLoop, bZCSent, bZCFall, eRxDrop, eRefused, eResets, eFailed, eRxCoal, cRxDrop, cTxXtra, cTx, cTxBytes, cRx, cRxBytes,
	cData, cResent, cPlaced, cPathFail, cTimeouts, cRetries, cMsgs, cSpurious, cCancel, cHeld, cKeyUpd, cTxCoal, pTx, pTxBytes, pRx, pRetx, pCE, pFail, pSRTT, pFailed,
	pWindow, pRestore, pReroll, cHint, cInfl}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d.d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(d desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.d, d.kind, v, labels...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, f := range c.backends {
		b := f()
		emit(bTxPackets, float64(b.TxPackets), t)
		emit(bTxBytes, float64(b.TxBytes), t)
		emit(bTxErrors, float64(b.TxErrors), t)
		emit(bRxPackets, float64(b.RxPackets), t)
		emit(bRxBytes, float64(b.RxBytes), t)
		emit(bRxCE, float64(b.RxCE), t)
		emit(bRxDrop, float64(b.RxInjectedDrops), t, "injected")
		emit(bRxDrop, float64(b.RxUnknownPeer), t, "unknown_peer")
		emit(bRxDrop, float64(b.RxTruncated), t, "truncated")
		emit(bRxDrop, float64(b.RxKernelDrops), t, "socket_buffer")
		emit(bRxDrop, float64(b.RxOtherDrops), t, "other")
		for _, l := range b.LoopSeconds {
			emit(bLoop, l.S, t, l.Phase)
		}
		if len(b.ZeroCopyFallbacks) > 0 {
			emit(bZCSent, float64(b.ZeroCopySent), t)
			for _, n := range b.ZeroCopyFallbacks {
				emit(bZCFall, float64(n.N), t, n.Reason)
			}
		}
	}
	for t, e := range c.endpoints {
		for _, n := range e.RxDropped {
			emit(eRxDrop, float64(n.N), t, n.Reason)
		}
		for _, n := range e.ConnectsRefused {
			emit(eRefused, float64(n.N), t, n.Reason)
		}
		for _, n := range e.Resets {
			emit(eResets, float64(n.N), t, n.Reason)
		}
		for _, n := range e.ConnsFailed {
			emit(eFailed, float64(n.N), t, n.Reason)
		}
		emit(eRxCoal, float64(e.RxCoalesced), t)
	}
	for t, conns := range c.conns {
		for _, k := range conns {
			emit(cTx, float64(k.TxPackets), t, k.ID)
			emit(cTxBytes, float64(k.TxBytes), t, k.ID)
			emit(cRx, float64(k.RxPackets), t, k.ID)
			emit(cRxBytes, float64(k.RxBytes), t, k.ID)
			emit(cData, float64(k.DataPackets), t, k.ID)
			emit(cResent, float64(k.DataResent), t, k.ID)
			emit(cPlaced, float64(k.PayloadPlaced), t, k.ID)
			emit(cPathFail, float64(k.PathFailures), t, k.ID)
			emit(cTimeouts, float64(k.Timeouts), t, k.ID)
			emit(cRetries, float64(k.Retries), t, k.ID)
			emit(cMsgs, float64(k.Messages), t, k.ID)
			emit(cSpurious, float64(k.SpuriousTimeouts), t, k.ID)
			emit(cCancel, float64(k.CopiesCancelled), t, k.ID)
			emit(cHeld, float64(k.LastChunksHeld), t, k.ID)
			emit(cKeyUpd, float64(k.KeyUpdates), t, k.ID)
			emit(cTxCoal, float64(k.TxCoalesced), t, k.ID)
			for _, n := range k.RxDropped {
				emit(cRxDrop, float64(n.N), t, k.ID, n.Reason)
			}
			for _, n := range k.TxExtra {
				emit(cTxXtra, float64(n.N), t, k.ID, n.Reason)
			}
			if len(k.Paths) > 0 {
				emit(cHint, k.RateHintBps/8, t, k.ID)
				emit(cInfl, float64(k.Inflight), t, k.ID)
			}
			for i, p := range k.Paths {
				if i >= MaxPaths {
					break
				}
				ps := strconv.Itoa(i)
				emit(pTx, float64(p.TxPackets), t, k.ID, ps)
				emit(pTxBytes, float64(p.TxBytes), t, k.ID, ps)
				emit(pRx, float64(p.RxPackets), t, k.ID, ps)
				emit(pRetx, float64(p.RetransmitSACK), t, k.ID, ps, "sack")
				emit(pRetx, float64(p.RetransmitTimeout), t, k.ID, ps, "timeout")
				emit(pCE, float64(p.CEReceived), t, k.ID, ps)
				emit(pFail, float64(p.Failures), t, k.ID, ps)
				emit(pSRTT, p.SRTT.Seconds(), t, k.ID, ps)
				f := 0.0
				if p.Failed {
					f = 1
				}
				emit(pFailed, f, t, k.ID, ps)
				emit(pWindow, float64(p.Window), t, k.ID, ps)
				emit(pRestore, float64(p.Restores), t, k.ID, ps)
				emit(pReroll, float64(p.Rerolls), t, k.ID, ps)
			}
		}
	}
}
