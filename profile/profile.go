// Package profile is the typed, validated configuration of the metaroce
// command: one Config, decoded from a YAML profile (configs/*.yaml), the
// environment and flags by cmd/metaroce, then passed down. It knows nothing
// of viper: Fields lists every key with a pointer to its field, Set
// converts one raw value into it, and Validate names the first key out of
// range, so the command can give a one-line error naming key and file.
package profile

import (
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/rocev2"
)

// Backend is the data path a profile runs on.
type Backend string

// The backends.
const (
	BackendUDP  Backend = "udp"  // kernel UDP sockets (engine/udp), any Linux
	BackendDPDK Backend = "dpdk" // DPDK poll-mode drivers with hugepages
)

// Transport is a transport core.
type Transport string

// The transports.
const (
	TransportMetaroce Transport = "metaroce"
	TransportRoCEv2   Transport = "rocev2"
)

// Config is a whole profile. The `key` tags are the YAML keys (and, with
// dots for nesting, the keys of --set, flags and METAROCE_* variables).
type Config struct {
	Name      string    `key:"name"`
	Backend   Backend   `key:"backend"`
	Transport Transport `key:"transport"`
	UDP       UDP       `key:"udp"`
	DPDK      DPDK      `key:"dpdk"`
	Metaroce  Metaroce  `key:"metaroce"`
	RoCEv2    RoCEv2    `key:"rocev2"`
	Security  Security  `key:"security"`
	Perf      Perf      `key:"perf"`
	Verbs     Verbs     `key:"verbs"`
	Bench     Bench     `key:"bench"`
	Metrics   Metrics   `key:"metrics"`
	Log       Log       `key:"log"`
}

// UDP configures the UDP-socket backend.
type UDP struct {
	// ServerIP and ClientIP are the IPv4 addresses the server's and the
	// client's endpoints use. Empty: the address of the TCP setup
	// connection at that end (right for two hosts; on one machine give
	// two loopback addresses, since peers are told apart by address).
	ServerIP string `key:"server_ip"`
	ClientIP string `key:"client_ip"`
	// Port is metaroce's UDP port and RoCEv2Port the RoCEv2 one; 0 lets
	// the kernel choose (the setup exchange tells the peer).
	Port       int `key:"port"`
	RoCEv2Port int `key:"rocev2_port"`
	// Burst is packets per recvmmsg/sendmmsg.
	Burst int `key:"burst"`
	// SocketBuffer is SO_RCVBUF/SO_SNDBUF in bytes.
	SocketBuffer int `key:"socket_buffer"`
	// Coalesce: the most packets one datagram carries (0: the backend's
	// default, 8; 1: one per datagram; engine/udp.Config.Coalesce).
	Coalesce int `key:"coalesce"`
	// DSCP of every packet sent.
	DSCP int `key:"dscp"`
	// Loss is the injected receive-path loss probability (0..1).
	Loss float64 `key:"loss"`
	// Seed seeds the loss.
	Seed int `key:"seed"`
}

// DPDK configures the DPDK backend: it is the engine's configuration
// (engine/dpdkengine.Config, docs/dpdk.md), with the same keys; 0 or empty
// takes the engine's default. The command validates it with the engine's
// own rules when the backend is dpdk (an error names the key and the file).
type DPDK struct {
	// EAL are the EAL arguments (--lcores, -a, --vdev, --file-prefix,
	// --no-huge, ...); those given on the command line after "--" follow.
	EAL []string `key:"eal"`
	// Ports are the DPDK ports, in plane order. perf uses them all; bench
	// runs its server node on ports[0] and its client on ports[1].
	Ports []DPDKPort `key:"ports"`
	// UDPPort is the UDP port the data path listens on and sends to.
	// 0: 4794 for metaroce, 4791 for rocev2.
	UDPPort int `key:"udp_port"`
	// Neighbours are static peers (optional: perf and bench add their peer
	// from the setup exchange and resolve its MAC with ARP).
	Neighbours []DPDKNeighbour `key:"neighbours"`
	// Checksum: auto (offload where the port has it), software or none
	// (the older spelling of udp_checksum: zero).
	Checksum string `key:"checksum"`
	// UDPChecksum: compute or zero (send UDP checksum 0 over IPv4, RFC
	// 768: the transport's own end-to-end CRC covers the packet). Empty:
	// the transport's default, zero for metaroce (its CRC32C), compute for
	// rocev2 (the baseline keeps its checksums).
	UDPChecksum string `key:"udp_checksum"`
	// Impair is the receive-path impairment stage (memif never drops).
	Impair DPDKImpair `key:"impair"`
	// PoolSize is the mbufs in the pool; DataRoom each mbuf's buffer
	// (2 KiB data + 128 headroom by default: MTU up to about 2000).
	PoolSize int `key:"pool_size"`
	DataRoom int `key:"data_room"`
	// Burst is packets per rx/tx burst; RxDesc, TxDesc descriptors per queue.
	Burst int `key:"burst"`
	// AckFlush: after this many packets of a receive burst (a coalesced
	// frame counts each it holds), send what the core has ready (a due
	// ACK) before handling the rest (0: 16, -1: only after the burst).
	AckFlush int `key:"ack_flush"`
	// Coalesce: the most packets one frame carries (0: the engine's
	// default; 1: one per frame; docs/dpdk.md).
	Coalesce int `key:"coalesce"`
	RxDesc   int `key:"rx_desc"`
	TxDesc   int `key:"tx_desc"`
	// IdleSpin and MaxIdleSleep: a shard's idle back-off; IdlePoll: the
	// longest wait for a frame inside one driver call while it spins.
	IdleSpin     time.Duration `key:"idle_spin"`
	MaxIdleSleep time.Duration `key:"max_idle_sleep"`
	IdlePoll     time.Duration `key:"idle_poll"`
	// ZeroCopyMin: data payloads of at least this many bytes go out by
	// reference from the registered region (zero-copy TX); 0: off (the
	// default: on memif it measured no faster, docs/dpdk.md).
	// ZeroCopySlots: payloads lent to the driver at once (0: tx_desc + 4
	// bursts).
	ZeroCopyMin   int `key:"zero_copy_min"`
	ZeroCopySlots int `key:"zero_copy_slots"`
}

// DPDKPort is one DPDK port: a vdev name (net_memif0) or a PCI address.
type DPDKPort struct {
	Name    string `key:"name"`
	IP      string `key:"ip"` // our IPv4 address, optionally /prefix
	Gateway string `key:"gateway"`
	Queues  int    `key:"queues"`
}

// DPDKNeighbour is a static peer: the peer handle, its IPv4 address and,
// optionally, its MAC.
type DPDKNeighbour struct {
	Peer int    `key:"peer"`
	IP   string `key:"ip"`
	MAC  string `key:"mac"`
}

// DPDKImpair drops and reorders received packets (for tests).
type DPDKImpair struct {
	Loss    float64 `key:"loss"`
	Reorder float64 `key:"reorder"`
	Seed    int     `key:"seed"`
}

// Metaroce holds the metaroce transport's parameters: the core's own
// Config, whose `key` tags name the keys (metaroce.paths,
// metaroce.path_window, ...: the same names as the experiment files'
// transport.metaroce section; docs/config-keys.md lists them all), and the
// link rate in the profile's unit. 0 or empty takes the core's default;
// the fields without a key tag (identity, queue depths) are the command's
// to set.
type Metaroce struct {
	mr.Config `key:",inline"`
	// LinkGbps is this endpoint's link rate, all ports together: the
	// receiver shares it among its senders (rate hints). 0: unknown, no
	// hints, senders rely on ECN alone.
	LinkGbps float64 `key:"link_gbps"`
}

// RoCEv2 holds the baseline's parameters: the core's own Config, whose
// `key` tags name the keys (rocev2.mtu, rocev2.ack_timeout_code,
// rocev2.dcqcn.disable, ...), as in the experiment files' transport.rocev2
// section. The fields without a key tag are the command's to set.
type RoCEv2 struct {
	rocev2.Config `key:",inline"`
}

// Core returns the baseline core's configuration for these parameters;
// the caller sets the addresses, AcceptIncoming and the queue depths.
func (r RoCEv2) Core() rocev2.Config { return r.Config }

// Perf holds what the perftest-style tools take from the profile.
type Perf struct {
	TCPPort int `key:"tcp_port"`
	TxDepth int `key:"tx_depth"`
	RxDepth int `key:"rx_depth"`
}

// MTU is the payload MTU of the profile's transport.
func (c Config) MTU() int {
	if c.Transport == TransportRoCEv2 {
		return c.RoCEv2.MTU
	}
	return c.Metaroce.MTU
}

// Verbs configures the libibverbs-compatible library (build/verbs,
// docs/verbs.md): the endpoint one process's device stands for.
type Verbs struct {
	// IP is the IPv4 address of the device (its GID 0 is the IPv4-mapped
	// form). Empty: udp.server_ip.
	IP string `key:"ip"`
	// Port is the UDP port the process listens on; 0 lets the kernel choose
	// one, so that several processes share one IP. The port is carried in
	// every QP number (QPN = port << 8 | index), so a peer finds it from the
	// dest_qp_num it is given.
	Port int `key:"port"`
}

// Bench is what `metaroce bench` runs and sweeps.
type Bench struct {
	// Test is one of the perf tests: write_bw, send_bw, read_bw.
	Test string `key:"test"`
	// Duration of each point (0: Iterations instead).
	Duration time.Duration `key:"duration"`
	// Iterations per QP of each point.
	Iterations int `key:"iterations"`
	// Transports compared, in order.
	Transports []string `key:"transports"`
	Sweep      Sweep    `key:"sweep"`
	// Plot is the PNG written (relative to the working directory).
	Plot string `key:"plot"`
}

// Sweep lists the values of each swept parameter; the bench runs their
// cross product (an empty list is the single default value).
type Sweep struct {
	Loss  []float64 `key:"loss"`
	Size  []int     `key:"size"`
	Paths []int     `key:"paths"`
	QPs   []int     `key:"qps"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Addr is host:port to serve /metrics on; empty serves nothing.
	Addr string `key:"addr"`
}

// Log configures the log on stderr.
type Log struct {
	Level string `key:"level"` // debug, info, warn, error
}

// Default is the configuration before any profile is read: every key has
// its value here, so a profile need only name what it changes.
func Default() Config {
	return Config{
		Name: "default", Backend: BackendUDP, Transport: TransportMetaroce,
		UDP: UDP{ServerIP: "127.0.0.1", ClientIP: "127.0.0.2", Port: 4794, RoCEv2Port: 4791, Burst: 32,
			SocketBuffer: 4 << 20, Seed: 1},
		Metaroce: Metaroce{Config: mr.Config{Paths: 8, Planes: 1, MTU: 4096, PathWindow: 64, AckEvery: 8, EntropyBase: 49152}},
		RoCEv2:   RoCEv2{Config: rocev2.Config{MTU: 4096, AckTimeoutCode: 8, RetryCount: 7}},
		Perf:     Perf{TCPPort: 18515, TxDepth: 128, RxDepth: 512},
		Bench: Bench{Test: "write_bw", Duration: 2 * time.Second, Transports: []string{"metaroce", "rocev2"},
			Sweep: Sweep{Loss: []float64{0}, Size: []int{65536}, Paths: []int{8}, QPs: []int{1}}, Plot: "bench.png"},
		Log:      Log{Level: "warn"},
		Security: Security{Mode: "none", Cipher: "aes-128-gcm"},
	}
}
