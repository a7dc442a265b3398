package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollectorNamesAndValues(t *testing.T) {
	c := NewCollector()
	c.SetBackend("metaroce", func() Backend { return Backend{TxPackets: 10, RxInjectedDrops: 3} })
	c.SetConns("metaroce", []Conn{{ID: "1", DataResent: 4, RateHintBps: 25e9, CopiesCancelled: 13, LastChunksHeld: 14, KeyUpdates: 19, TxCoalesced: 21,
		RxDropped: []Count{{"duplicate", 5}, {"stale_generation", 6}}, TxExtra: []Count{{"moved", 8}},
		Paths: []Path{{TxPackets: 7, SRTT: 20 * time.Microsecond, Window: 12}}}})
	c.SetEndpoint("metaroce", Endpoint{RxDropped: []Count{{"crc", 2}, {"unknown_conn", 9}},
		ConnectsRefused: []Count{{"max_conns", 15}, {"per_peer", 16}}, Resets: []Count{{"rate_limited", 17}},
		ConnsFailed: []Count{{"half_open_evicted", 18}}, RxCoalesced: 20})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 11 backend series, 2 endpoint drop reasons, 2 refusal reasons, 1
	// reset outcome, 1 failure reason, 1 coalesced count, 18 per
	// connection and its 3 reasons, 12 per path.
	if n != 11+2+2+1+1+1+18+3+12 {
		t.Fatalf("%d series", n)
	}
	want := `
# HELP metaroce_conn_data_resent_total Data packets sent again.
# TYPE metaroce_conn_data_resent_total counter
metaroce_conn_data_resent_total{conn="1",transport="metaroce"} 4
# HELP metaroce_path_srtt_seconds A path's smoothed round-trip time.
# TYPE metaroce_path_srtt_seconds gauge
metaroce_path_srtt_seconds{conn="1",path="0",transport="metaroce"} 2e-05
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want+`# HELP metaroce_path_window_packets A path's congestion window.
# TYPE metaroce_path_window_packets gauge
metaroce_path_window_packets{conn="1",path="0",transport="metaroce"} 12
# HELP metaroce_conn_rate_hint_bytes_per_second The rate the peer's last ACK asked for (0: none).
# TYPE metaroce_conn_rate_hint_bytes_per_second gauge
metaroce_conn_rate_hint_bytes_per_second{conn="1",transport="metaroce"} 3.125e+09
# HELP metaroce_conn_rx_dropped_total Packets of a connection received and not placed, by reason.
# TYPE metaroce_conn_rx_dropped_total counter
metaroce_conn_rx_dropped_total{conn="1",reason="duplicate",transport="metaroce"} 5
metaroce_conn_rx_dropped_total{conn="1",reason="stale_generation",transport="metaroce"} 6
# HELP metaroce_conn_tx_extra_packets_total Packets a connection sent beyond first transmissions and data resends, by reason.
# TYPE metaroce_conn_tx_extra_packets_total counter
metaroce_conn_tx_extra_packets_total{conn="1",reason="moved",transport="metaroce"} 8
# HELP metaroce_endpoint_rx_dropped_total Packets the transport endpoint dropped before finding a connection (crc counts every CRC failure), by reason.
# TYPE metaroce_endpoint_rx_dropped_total counter
metaroce_endpoint_rx_dropped_total{reason="crc",transport="metaroce"} 2
metaroce_endpoint_rx_dropped_total{reason="unknown_conn",transport="metaroce"} 9
# HELP metaroce_endpoint_connects_refused_total Connection requests the transport endpoint refused, by reason.
# TYPE metaroce_endpoint_connects_refused_total counter
metaroce_endpoint_connects_refused_total{reason="max_conns",transport="metaroce"} 15
metaroce_endpoint_connects_refused_total{reason="per_peer",transport="metaroce"} 16
# HELP metaroce_endpoint_resets_total RESETs the transport endpoint would send, by outcome (sent; rate_limited, which counts the repeated CLOSE_ACKs sharing their limit too).
# TYPE metaroce_endpoint_resets_total counter
metaroce_endpoint_resets_total{outcome="rate_limited",transport="metaroce"} 17
# HELP metaroce_endpoint_conns_failed_total Connections the transport endpoint ended by itself, by reason.
# TYPE metaroce_endpoint_conns_failed_total counter
metaroce_endpoint_conns_failed_total{reason="half_open_evicted",transport="metaroce"} 18
# HELP metaroce_conn_copies_cancelled_total Copies moved off a path and not sent: the original's ACK came first (metaroce).
# TYPE metaroce_conn_copies_cancelled_total counter
metaroce_conn_copies_cancelled_total{conn="1",transport="metaroce"} 13
# HELP metaroce_conn_last_chunks_held_total WRITE last chunks that came before the rest and were placed last (metaroce).
# TYPE metaroce_conn_last_chunks_held_total counter
metaroce_conn_last_chunks_held_total{conn="1",transport="metaroce"} 14
# HELP metaroce_conn_key_updates_total Key epochs moved to, both directions (metaroce, security.mode auth or encrypt).
# TYPE metaroce_conn_key_updates_total counter
metaroce_conn_key_updates_total{conn="1",transport="metaroce"} 19
# HELP metaroce_endpoint_rx_coalesced_datagrams_total Coalesced datagrams received well formed; their packets count one by one (metaroce).
# TYPE metaroce_endpoint_rx_coalesced_datagrams_total counter
metaroce_endpoint_rx_coalesced_datagrams_total{transport="metaroce"} 20
# HELP metaroce_conn_tx_coalesced_packets_total Packets sent appended to another packet's datagram (metaroce, dpdk.coalesce).
# TYPE metaroce_conn_tx_coalesced_packets_total counter
metaroce_conn_tx_coalesced_packets_total{conn="1",transport="metaroce"} 21
`), "metaroce_conn_data_resent_total", "metaroce_path_srtt_seconds", "metaroce_path_window_packets",
		"metaroce_conn_rate_hint_bytes_per_second", "metaroce_conn_rx_dropped_total", "metaroce_conn_tx_extra_packets_total",
		"metaroce_endpoint_rx_dropped_total", "metaroce_endpoint_connects_refused_total", "metaroce_endpoint_resets_total",
		"metaroce_endpoint_conns_failed_total", "metaroce_conn_copies_cancelled_total",
		"metaroce_conn_last_chunks_held_total", "metaroce_conn_key_updates_total",
		"metaroce_endpoint_rx_coalesced_datagrams_total", "metaroce_conn_tx_coalesced_packets_total"); err != nil {
		t.Fatal(err)
	}
	// Lint: names, units and _total suffixes.
	probs, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestConnsBounded(t *testing.T) {
	c := NewCollector()
	c.SetConns("rocev2", make([]Conn, MaxConns+10))
	if len(c.conns["rocev2"]) != MaxConns {
		t.Fatal(len(c.conns["rocev2"]))
	}
}

// A backend that measures its loop's time split shows one series per
// phase; one that does not shows none (not five zeros).
func TestLoopSeconds(t *testing.T) {
	c := NewCollector()
	c.SetBackend("metaroce", func() Backend {
		return Backend{LoopSeconds: []Seconds{{"rx", 1.5}, {"core", 2}, {"tx", 0.25}, {"app", 0.125}, {"idle", 4}}}
	})
	c.SetBackend("rocev2", func() Backend { return Backend{} })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `# HELP metaroce_backend_loop_seconds_total Wall time of the backend's data-path loop by phase: rx (receive bursts, parsing), core (the transport), tx (headers, transmit bursts), app (the application's step), idle. Only backends that measure it (dpdk).
# TYPE metaroce_backend_loop_seconds_total counter
metaroce_backend_loop_seconds_total{phase="app",transport="metaroce"} 0.125
metaroce_backend_loop_seconds_total{phase="core",transport="metaroce"} 2
metaroce_backend_loop_seconds_total{phase="idle",transport="metaroce"} 4
metaroce_backend_loop_seconds_total{phase="rx",transport="metaroce"} 1.5
metaroce_backend_loop_seconds_total{phase="tx",transport="metaroce"} 0.25
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metaroce_backend_loop_seconds_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "metaroce_backend_loop_seconds_total"); err != nil || n != 5 {
		t.Fatalf("%d series (%v), want the 5 phases of one backend", n, err)
	}
}

// A backend with zero-copy TX shows its packets sent by reference and its
// fallbacks by reason; one without shows neither.
func TestZeroCopySeries(t *testing.T) {
	c := NewCollector()
	c.SetBackend("metaroce", func() Backend {
		return Backend{ZeroCopySent: 7, ZeroCopyFallbacks: []Count{{"not_dpdk_memory", 1}, {"no_slot", 2}, {"no_mbuf", 0}}}
	})
	c.SetBackend("rocev2", func() Backend { return Backend{} })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `# HELP metaroce_backend_zero_copy_packets_total Data packets sent with their payload attached from the registered region instead of copied (dpdk zero_copy_min).
# TYPE metaroce_backend_zero_copy_packets_total counter
metaroce_backend_zero_copy_packets_total{transport="metaroce"} 7
# HELP metaroce_backend_zero_copy_fallbacks_total Packets that qualified for zero-copy TX and were copied, by reason (not_dpdk_memory, no_slot, no_mbuf).
# TYPE metaroce_backend_zero_copy_fallbacks_total counter
metaroce_backend_zero_copy_fallbacks_total{reason="no_mbuf",transport="metaroce"} 0
metaroce_backend_zero_copy_fallbacks_total{reason="no_slot",transport="metaroce"} 2
metaroce_backend_zero_copy_fallbacks_total{reason="not_dpdk_memory",transport="metaroce"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metaroce_backend_zero_copy_packets_total", "metaroce_backend_zero_copy_fallbacks_total"); err != nil {
		t.Fatal(err)
	}
}
