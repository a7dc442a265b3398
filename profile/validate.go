package profile

import (
	"fmt"
	"net/netip"
	"slices"
)

// FieldError is a value out of range, by key.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

func bad(key, format string, args ...any) error {
	return &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Validate returns a *FieldError for the first key out of range.
func (c *Config) Validate() error {
	switch c.Backend {
	case BackendUDP, BackendDPDK:
	default:
		return bad("backend", "%q is not a backend (udp or dpdk)", c.Backend)
	}
	if err := checkTransport("transport", string(c.Transport)); err != nil {
		return err
	}
	u := c.UDP
	for _, ip := range []struct{ k, v string }{{"udp.server_ip", u.ServerIP}, {"udp.client_ip", u.ClientIP}, {"verbs.ip", c.Verbs.IP}} {
		if ip.v == "" {
			continue
		}
		a, err := netip.ParseAddr(ip.v)
		if err != nil || !a.Is4() {
			return bad(ip.k, "%q is not an IPv4 address", ip.v)
		}
	}
	ranges := []struct {
		k         string
		v, lo, hi int
	}{
		{"udp.port", u.Port, 0, 65535},
		{"udp.rocev2_port", u.RoCEv2Port, 0, 65535},
		{"udp.burst", u.Burst, 1, 1024},
		{"udp.socket_buffer", u.SocketBuffer, 0, 1 << 30},
		{"udp.coalesce", u.Coalesce, 0, 64},
		{"udp.dscp", u.DSCP, 0, 63},
		{"udp.seed", u.Seed, 0, 1 << 62},
		{"dpdk.udp_port", c.DPDK.UDPPort, 0, 65535},
		{"dpdk.impair.seed", c.DPDK.Impair.Seed, 0, 1 << 62},
		{"metaroce.paths", c.Metaroce.Paths, 1, 256},
		{"metaroce.planes", c.Metaroce.Planes, 1, 16},
		{"metaroce.mtu", c.Metaroce.MTU, 256, 9000},
		{"metaroce.path_window", c.Metaroce.PathWindow, 1, 256},
		{"metaroce.ack_every", c.Metaroce.AckEvery, 1, 256},
		{"metaroce.entropy_base", int(c.Metaroce.EntropyBase), 1024, 65535},
		{"rocev2.ack_timeout_code", int(c.RoCEv2.AckTimeoutCode), 1, 31},
		{"rocev2.retry_count", c.RoCEv2.RetryCount, 0, 255},
		{"perf.tcp_port", c.Perf.TCPPort, 0, 65535},
		{"verbs.port", c.Verbs.Port, 0, 65535},
		{"perf.tx_depth", c.Perf.TxDepth, 1, 15000},
		{"perf.rx_depth", c.Perf.RxDepth, 1, 16384},
		{"bench.iterations", c.Bench.Iterations, 0, 100000000},
	}
	for _, r := range ranges {
		if r.v < r.lo || r.v > r.hi {
			return bad(r.k, "%d is out of range %d..%d", r.v, r.lo, r.hi)
		}
	}
	if err := c.Metaroce.validateCore(); err != nil {
		return err
	}
	if err := c.RoCEv2.validateCore(); err != nil {
		return err
	}
	if err := c.Security.validate(c.Transport); err != nil {
		return err
	}
	if int(c.Metaroce.EntropyBase)+c.Metaroce.Paths > 65536 {
		return bad("metaroce.entropy_base", "%d leaves no room for %d paths", c.Metaroce.EntropyBase, c.Metaroce.Paths)
	}
	if !(u.Loss >= 0 && u.Loss <= 1) {
		return bad("udp.loss", "%v is out of range 0..1", u.Loss)
	}
	if !slices.Contains([]int{256, 512, 1024, 2048, 4096}, c.RoCEv2.MTU) {
		return bad("rocev2.mtu", "%d is not an IB MTU (256, 512, 1024, 2048, 4096)", c.RoCEv2.MTU)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	if c.Metrics.Addr != "" {
		if _, err := netip.ParseAddrPort(c.Metrics.Addr); err != nil {
			return bad("metrics.addr", "%q is not host:port (an IP address and a port)", c.Metrics.Addr)
		}
	}
	b := c.Bench
	if !slices.Contains([]string{"write_bw", "send_bw", "read_bw"}, b.Test) {
		return bad("bench.test", "%q is not write_bw, send_bw or read_bw", b.Test)
	}
	if b.Duration < 0 {
		return bad("bench.duration", "%v is negative", b.Duration)
	}
	if b.Duration == 0 && b.Iterations == 0 {
		return bad("bench.iterations", "0 with bench.duration 0: one of them must be set")
	}
	if len(b.Transports) == 0 {
		return bad("bench.transports", "is empty")
	}
	for _, t := range b.Transports {
		if err := checkTransport("bench.transports", t); err != nil {
			return err
		}
	}
	for _, l := range b.Sweep.Loss {
		if !(l >= 0 && l < 1) {
			return bad("bench.sweep.loss", "%v is out of range 0..1 (exclusive)", l)
		}
	}
	for _, s := range b.Sweep.Size {
		if s < 1 || s > 8<<20 {
			return bad("bench.sweep.size", "%d is out of range 1..8388608", s)
		}
	}
	for _, p := range b.Sweep.Paths {
		if p < 1 || p > 256 {
			return bad("bench.sweep.paths", "%d is out of range 1..256", p)
		}
	}
	for _, q := range b.Sweep.QPs {
		if q < 1 || q > 64 {
			return bad("bench.sweep.qps", "%d is out of range 1..64", q)
		}
	}
	if b.Plot == "" {
		return bad("bench.plot", "is empty")
	}
	return nil
}

func checkTransport(key, t string) error {
	switch Transport(t) {
	case TransportMetaroce, TransportRoCEv2:
		return nil
	}
	return bad(key, "%q is not a transport (metaroce or rocev2)", t)
}
