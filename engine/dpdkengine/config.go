//go:build dpdk

// Package dpdkengine runs metaroce transport cores over DPDK ports: the
// engine shard loop (rx burst, decode, hand the UDP payload to the core,
// which places its data straight into registered memory; timers; tx from
// the core into mbufs; bursts out), Ethernet/IPv4/UDP framing with checksum
// offload where the port has it, ARP, static neighbours, a receive
// impairment stage for tests, and the Go API the CLI starts it with.
package dpdkengine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/metaroce/metaroce/metaroce"
)

// Config is the DPDK backend's profile. Zero values mean the documented
// default; Validate names the key that is wrong.
type Config struct {
	// EAL are the EAL arguments (-l, -a, --vdev, --file-prefix,
	// --no-huge, --in-memory, ...), as after the program name and before
	// "--" on a DPDK command line. Ignored when the EAL already runs.
	EAL []string `yaml:"eal"`
	// Ports are the ports the engine drives; plane i of the protocol core
	// goes out on Ports[i % len(Ports)].
	Ports []PortConfig `yaml:"ports"`
	// UDPPort is the UDP destination port we listen on and send to.
	// Default metaroce.DefaultUDPPort (4794).
	UDPPort uint16 `yaml:"udp_port"`
	// Neighbours are static peers: a peer handle, its IPv4 address and,
	// optionally, its MAC (else resolved with ARP).
	Neighbours []Neighbour `yaml:"neighbours"`
	// MaxLearnedPeers bounds the peers learned from arriving packets:
	// sources that are neither static neighbours nor added with AddPeer
	// (which are what a server that was told its clients, as the CLI's
	// perf server is, needs; the UDP backend learns none). Default
	// DefaultMaxLearnedPeers; -1 learns none. A packet from a further
	// unknown source is dropped and counted (DropUnknownPeer), so spoofed
	// source addresses cannot fill the table (maxPeers) or the core's
	// per-peer state.
	MaxLearnedPeers int `yaml:"max_learned_peers"`
	// Checksum is how the checksums that are computed are computed:
	// "auto" (default: by the port where it offers the offload, on tx and
	// rx, else in software) or "software" (always in software, for tests).
	// "none" is the older spelling of udp_checksum: zero.
	Checksum string `yaml:"checksum"`
	// UDPChecksum is whether sent datagrams carry a UDP checksum:
	// "compute" (default) or "zero". Zero is what RFC 768 allows over IPv4
	// when the payload carries its own end-to-end check: metaroce's
	// CRC32C (or RoCEv2's ICRC) covers every byte the UDP checksum would,
	// so computing it (on tx) and verifying it (on rx) is paid twice. A
	// received zero checksum is never verified, whatever this says; a
	// non-zero one from a peer always is (by the port where it offers
	// that, else in software). The CLI defaults it per transport.
	UDPChecksum string `yaml:"udp_checksum"`
	// Impair is a receive-path impairment stage for tests (memif never
	// drops or reorders).
	Impair Impairment `yaml:"impair"`
	// PoolSize is the number of mbufs per engine. Default 8191.
	PoolSize int `yaml:"pool_size"`
	// DataRoom is each mbuf's buffer size including 128 bytes of
	// headroom. Default 2176 (2 KiB of data).
	DataRoom int `yaml:"data_room"`
	// Burst is the rx/tx burst size. Default 32.
	Burst int `yaml:"burst"`
	// AckFlush: once AckFlush packets of a receive burst are queued (a
	// coalesced frame counts every packet it holds), the shard hands
	// them to the core and sends at once what the core has ready then
	// (an ACK due at once, for a message's last packet), before it
	// handles the rest of the burst. A sender whose whole
	// window arrives in one burst otherwise waits for the burst's last
	// frame to be handled before the first ACK leaves, and sits idle
	// meanwhile: the two ends take turns instead of overlapping (64 B
	// messages, 32 outstanding, over memif: about 1.1 M messages/s with
	// one ACK per burst, 1.4 to 1.8 M with AckFlush 16; docs/dpdk.md).
	// Default 16; -1: only after the whole burst.
	AckFlush int `yaml:"ack_flush"`
	// Coalesce is the most packets one frame carries: above 1, a frame
	// the core built may take more packets of the same connection (new
	// data on the same path, within the connection's largest packet;
	// metaroce/coalesce.go), which saves a frame's cost per small
	// message. 0 (the default) is engine.AutoCoalesce (8): 64 B messages
	// with 32 outstanding measured about 3.5x the messages/s over
	// af_packet, whose every frame costs the sending core a kernel
	// crossing, and about 1.3x over memif (docs/dpdk.md). 1: one packet
	// per frame.
	Coalesce int `yaml:"coalesce"`
	// RxDesc and TxDesc are the descriptors per queue. Default 1024.
	RxDesc int `yaml:"rx_desc"`
	TxDesc int `yaml:"tx_desc"`
	// IdleSpin is how long a shard keeps polling without work before it
	// starts sleeping; MaxIdleSleep caps each sleep. Defaults 1ms, 50µs.
	// A sleeping shard answers late (Go's timers wake it tens of µs late
	// or worse), which stalls a peer waiting for ACKs, so it sleeps only
	// after a pause longer than any round trip in flight.
	IdleSpin     time.Duration `yaml:"idle_spin"`
	MaxIdleSleep time.Duration `yaml:"max_idle_sleep"`
	// IdlePoll bounds one wait of a spinning idle shard inside its
	// driver call: it polls the receive queue there, a pause instruction
	// between polls, and runs its loop (the application's step, the
	// timers) again once a frame comes, Shard.Kick or Do is called, or
	// IdlePoll has passed. Default 5µs: a step that watches the wall
	// clock is late by about a round trip at most, and an idle shard
	// makes about 2x10^5 cgo calls a second instead of millions.
	IdlePoll time.Duration `yaml:"idle_poll"`
	// ZeroCopyMin is the smallest data payload, in bytes, that goes out
	// by reference (zero-copy TX, docs/dpdk.md): the headers in an mbuf,
	// the payload attached from the registered region as an external
	// buffer, the CRC32C trailer in a third segment. Smaller payloads,
	// every packet of a transport that cannot scatter, sealed security
	// modes and memory outside DPDK's are copied as before. 0: off; the
	// CLI's profile default is DefaultZeroCopyMin.
	ZeroCopyMin int `yaml:"zero_copy_min"`
	// ZeroCopySlots bounds the payloads lent to the driver at once (one
	// shared-info record each); when they run out the shard copies
	// (counted). Default TxDesc + 4 bursts.
	ZeroCopySlots int `yaml:"zero_copy_slots"`
}

// DefaultZeroCopyMin is the zero-copy threshold the CLI uses unless a
// profile sets one (BenchmarkZeroCopyTX picks it).
const DefaultZeroCopyMin = 0

// PortConfig is one DPDK port.
type PortConfig struct {
	// Name is the DPDK device name: a vdev name (net_memif0, net_af_packet0)
	// or a PCI address (0000:3b:00.0).
	Name string `yaml:"name"`
	// IP is our IPv4 address on this port, optionally with its prefix
	// length ("10.1.0.2/24"; default /32: every peer is on-link).
	IP string `yaml:"ip"`
	// Gateway is the next hop for peers outside IP's prefix (optional).
	// Its MAC is resolved with ARP; without a gateway every peer must be
	// on-link (or answered for by proxy ARP).
	Gateway string `yaml:"gateway"`
	// Queues is the rx/tx queue pairs to configure. Default 1; shard
	// traffic uses queue 0, extra queues are free for other senders.
	Queues int `yaml:"queues"`
}

// Neighbour is a static peer.
type Neighbour struct {
	Peer uint32 `yaml:"peer"` // the verbs.PeerHandle the application uses
	IP   string `yaml:"ip"`
	MAC  string `yaml:"mac"` // optional: resolved with ARP when empty
}

// Impairment drops and reorders received packets addressed to us.
type Impairment struct {
	Loss    float64 `yaml:"loss"`    // probability a packet is dropped
	Reorder float64 `yaml:"reorder"` // probability a packet is held back behind later ones
	Seed    uint64  `yaml:"seed"`
}

// Defaults returns c with zero fields set.
func (c Config) Defaults() Config {
	if c.UDPPort == 0 {
		c.UDPPort = metaroce.DefaultUDPPort
	}
	if c.Checksum == "" {
		c.Checksum = "auto"
	}
	if c.UDPChecksum == "" {
		c.UDPChecksum = "compute"
		if c.Checksum == "none" {
			c.UDPChecksum = "zero"
		}
	}
	if c.PoolSize == 0 {
		c.PoolSize = 8191
	}
	if c.DataRoom == 0 {
		c.DataRoom = 2048 + 128
	}
	if c.Burst == 0 {
		c.Burst = 32
	}
	if c.AckFlush == 0 {
		c.AckFlush = 16
	}
	if c.RxDesc == 0 {
		c.RxDesc = 1024
	}
	if c.TxDesc == 0 {
		c.TxDesc = 1024
	}
	if c.IdleSpin == 0 {
		c.IdleSpin = time.Millisecond
	}
	if c.MaxIdleSleep == 0 {
		c.MaxIdleSleep = 50 * time.Microsecond
	}
	if c.IdlePoll == 0 {
		c.IdlePoll = 5 * time.Microsecond
	}
	if c.ZeroCopySlots == 0 {
		c.ZeroCopySlots = c.TxDesc + 4*c.Burst
	}
	for i := range c.Ports {
		if c.Ports[i].Queues == 0 {
			c.Ports[i].Queues = 1
		}
	}
	return c
}

// Validate checks c (after Defaults) and names the first bad key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("dpdk config: %s: %s", key, fmt.Sprintf(format, a...)))
	}
	if len(c.Ports) == 0 {
		bad("ports", "at least one port is needed")
	}
	names := map[string]bool{}
	for i, p := range c.Ports {
		if p.Name == "" {
			bad(fmt.Sprintf("ports[%d].name", i), "empty")
		} else if names[p.Name] {
			bad(fmt.Sprintf("ports[%d].name", i), "%q listed twice", p.Name)
		}
		names[p.Name] = true
		if _, _, err := parseCIDR(p.IP); err != nil {
			bad(fmt.Sprintf("ports[%d].ip", i), "%v", err)
		}
		if p.Gateway != "" {
			gw, err := parseIP(p.Gateway)
			if err != nil {
				bad(fmt.Sprintf("ports[%d].gateway", i), "%v", err)
			} else if ip, bits, err := parseCIDR(p.IP); err == nil && !sameSubnet(ip, gw, bits) {
				bad(fmt.Sprintf("ports[%d].gateway", i), "%s is not inside %s", p.Gateway, p.IP)
			}
		}
		if p.Queues < 1 || p.Queues > 64 {
			bad(fmt.Sprintf("ports[%d].queues", i), "%d outside 1..64", p.Queues)
		}
	}
	seen := map[uint32]bool{}
	for i, n := range c.Neighbours {
		if seen[n.Peer] {
			bad(fmt.Sprintf("neighbours[%d].peer", i), "peer %d listed twice", n.Peer)
		}
		seen[n.Peer] = true
		if n.Peer >= maxPeers {
			bad(fmt.Sprintf("neighbours[%d].peer", i), "%d not below %d", n.Peer, maxPeers)
		}
		if _, err := parseIP(n.IP); err != nil {
			bad(fmt.Sprintf("neighbours[%d].ip", i), "%v", err)
		}
		if n.MAC != "" {
			if _, err := parseMAC(n.MAC); err != nil {
				bad(fmt.Sprintf("neighbours[%d].mac", i), "%v", err)
			}
		}
	}
	if c.MaxLearnedPeers < -1 || c.MaxLearnedPeers > maxPeers {
		bad("max_learned_peers", "%d outside -1..%d", c.MaxLearnedPeers, maxPeers)
	}
	switch c.Checksum {
	case "auto", "software", "none":
	default:
		bad("checksum", "%q is not auto, software or none", c.Checksum)
	}
	switch c.UDPChecksum {
	case "compute", "zero":
		if c.Checksum == "none" && c.UDPChecksum == "compute" {
			bad("udp_checksum", "compute contradicts checksum: none (UDP checksum 0)")
		}
	default:
		bad("udp_checksum", "%q is not compute or zero", c.UDPChecksum)
	}
	if c.Impair.Loss < 0 || c.Impair.Loss >= 1 {
		bad("impair.loss", "%v outside [0, 1)", c.Impair.Loss)
	}
	if c.Impair.Reorder < 0 || c.Impair.Reorder >= 1 {
		bad("impair.reorder", "%v outside [0, 1)", c.Impair.Reorder)
	}
	if c.PoolSize < 1023 {
		bad("pool_size", "%d below 1023", c.PoolSize)
	}
	if c.DataRoom < 128+HdrLen+512 || c.DataRoom > 65535 {
		bad("data_room", "%d outside %d..65535", c.DataRoom, 128+HdrLen+512)
	}
	if c.Burst < 1 || c.Burst > 512 {
		bad("burst", "%d outside 1..512", c.Burst)
	}
	if c.AckFlush < -1 || c.AckFlush > 512 {
		bad("ack_flush", "%d outside -1..512", c.AckFlush)
	}
	if c.Coalesce < 0 || c.Coalesce > 64 {
		bad("coalesce", "%d outside 0..64", c.Coalesce)
	}
	if c.RxDesc < 32 || c.TxDesc < 32 {
		bad("rx_desc/tx_desc", "%d/%d below 32", c.RxDesc, c.TxDesc)
	}
	if c.IdleSpin < 0 || c.IdleSpin > time.Second {
		bad("idle_spin", "%v outside 0..1s", c.IdleSpin)
	}
	if c.MaxIdleSleep < 0 || c.MaxIdleSleep > time.Second {
		bad("max_idle_sleep", "%v outside 0..1s", c.MaxIdleSleep)
	}
	if c.IdlePoll < 0 || c.IdlePoll > time.Second {
		bad("idle_poll", "%v outside 0..1s", c.IdlePoll)
	}
	if c.ZeroCopyMin < 0 || c.ZeroCopyMin > 65535 {
		bad("zero_copy_min", "%d outside 0..65535", c.ZeroCopyMin)
	}
	if c.ZeroCopySlots < 1 || c.ZeroCopySlots > 1<<20 {
		bad("zero_copy_slots", "%d outside 1..%d", c.ZeroCopySlots, 1<<20)
	}
	return errors.Join(errs...)
}

// LoadConfig decodes a YAML profile strictly: an unknown key is an error
// that names it (with its line). Defaults are applied and the result is
// validated.
func LoadConfig(r io.Reader) (Config, error) {
	var c Config
	data, err := io.ReadAll(r)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("dpdk config: %w", err)
	}
	c = c.Defaults()
	return c, c.Validate()
}

// SplitArgs splits a DPDK-style command line, "[EAL args] -- [app args]",
// into the EAL part and the application part. Without "--" everything is
// application arguments.
func SplitArgs(args []string) (eal, app []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return nil, args
}

func parseIP(s string) (IPv4, error) {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return IPv4{}, fmt.Errorf("%q is not an IPv4 address", s)
	}
	return IPv4(ip), nil
}

// parseCIDR accepts "a.b.c.d" (prefix 32) or "a.b.c.d/n".
func parseCIDR(s string) (IPv4, int, error) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		ip, err := parseIP(s[:i])
		if err != nil {
			return ip, 0, err
		}
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || n < 0 || n > 32 {
			return ip, 0, fmt.Errorf("%q: prefix length must be 0..32", s)
		}
		return ip, n, nil
	}
	ip, err := parseIP(s)
	return ip, 32, err
}

func sameSubnet(a, b IPv4, bits int) bool {
	mask := ^uint32(0) << (32 - bits)
	if bits == 0 {
		mask = 0
	}
	return binary.BigEndian.Uint32(a[:])&mask == binary.BigEndian.Uint32(b[:])&mask
}

func parseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return MAC{}, fmt.Errorf("%q is not an Ethernet address", s)
	}
	return MAC(hw), nil
}
