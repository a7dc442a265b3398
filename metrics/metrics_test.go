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
	c.SetConns("metaroce", []Conn{{ID: "1", DataResent: 4, RateHintBps: 25e9,
		Paths: []Path{{TxPackets: 7, SRTT: 20 * time.Microsecond, Window: 12}}}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 10 backend series, 13 per connection, 12 per path.
	if n != 10+13+12 {
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
`), "metaroce_conn_data_resent_total", "metaroce_path_srtt_seconds", "metaroce_path_window_packets",
		"metaroce_conn_rate_hint_bytes_per_second"); err != nil {
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
