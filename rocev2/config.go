package rocev2

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// DefaultPeerIP is the address Config.PeerIP gives peer handle h when the
// backend supplies none: 10.0.0.(h+1), so that in a two-endpoint setup
// handle 0 is 10.0.0.1 and handle 1 is 10.0.0.2.
func DefaultPeerIP(h verbs.PeerHandle) IPv4 {
	v := uint32(h) + 1
	return IPv4{10, byte(v >> 16), byte(v >> 8), byte(v)}
}

// Config holds an endpoint's parameters. The zero value of a field means
// "use the default"; Defaults documents each default and Validate names the
// field that is out of range. Where the field exists in verbs, its name and
// units follow ibv_qp_attr.
//
// The `key` tags name each tunable parameter, once for both front ends:
// the profiles (rocev2.<key>) and the experiment files
// (transport.rocev2.<key>) derive their keys from them (internal/keys);
// DCQCN is the section rocev2.dcqcn. A field without a tag is the
// program's to set (addresses, line rate, queue depths, numbering).
type Config struct {
	// LocalIP is this endpoint's IPv4 address and PeerIP maps a peer handle
	// to the peer's: both enter the ICRC (see ComputeICRC) and the CM's
	// path GIDs. Defaults: 10.0.0.1 and DefaultPeerIP.
	LocalIP IPv4
	PeerIP  func(verbs.PeerHandle) IPv4

	// MTU is the path MTU: payload bytes per packet, one of 256, 512, 1024,
	// 2048, 4096. A connection uses the smaller of both sides'. Default 4096.
	MTU int `key:"mtu"`
	// PKey is the partition key sent in every BTH. Default 0xFFFF.
	PKey uint16

	// AckTimeoutCode is the local ACK timeout as an IB code (ibv_qp_attr
	// timeout): 4.096 µs * 2^code, 1..31. Default 8 (1.05 ms), close to
	// metaroce's initial RTO; perftest uses 14 (67 ms).
	AckTimeoutCode uint8 `key:"ack_timeout_code"`
	// RetryCount is how often a requester retries after a local ACK
	// timeout, a PSN sequence NAK or a missing READ response before the
	// work request fails with StatusRetryExceeded (ibv_qp_attr retry_cnt,
	// 0..7 in the IBA). Values up to 255 are accepted as an extension for
	// experiments on very lossy links; the CM carries min(value, 7).
	// Default 7.
	RetryCount int `key:"retry_count"`
	// RNRRetry is how often a requester retries after an RNR NAK
	// (ibv_qp_attr rnr_retry, 0..7; 7 means without limit, as in the IBA).
	// Default 7.
	RNRRetry int `key:"rnr_retry"`
	// MinRNRTimer is the RNR NAK timer code this endpoint's responder
	// sends (ibv_qp_attr min_rnr_timer, IBA Table 45). Default 12 (0.64 ms,
	// perftest's value).
	MinRNRTimer uint8 `key:"min_rnr_timer"`
	// AckReqEvery: the requester sets AckReq on the last packet of every
	// message and on every AckReqEvery-th packet of a long one, so ACKs
	// come at least that often. Default 8.
	AckReqEvery int `key:"ack_req_every"`
	// MaxRdAtomic bounds the READ requests a requester has outstanding
	// (ibv_qp_attr max_rd_atomic; the CM negotiates it down to the peer's
	// responder resources). Default 16, ConnectX's maximum.
	MaxRdAtomic int `key:"max_rd_atomic"`

	// SendQueueDepth and RecvQueueDepth bound the outstanding work requests
	// of a QP. Defaults 4096 and 4096.
	SendQueueDepth int
	RecvQueueDepth int

	// AcceptIncoming makes the endpoint accept CM REQs.
	AcceptIncoming bool
	// ConnectRetry is the wait after the first CM REQ (or REP) before it is
	// sent again; each further wait doubles, up to ConnectRetryMax
	// (verbs.RetryInterval, as in the metaroce core), and ConnectRetries is
	// how many are sent before the connection fails. An HCA's CM waits its
	// Remote CM Response Timeout between REQs (seconds with rdma_cm's
	// default); the doubling keeps a lost REQ's cost near 1 ms while a peer
	// that is slow to answer (a descheduled listener) still has 0.93 s with
	// the defaults: 1 ms, 100 ms (or ConnectRetry, if larger) and 15 (the
	// CM's largest Max CM Retries).
	ConnectRetry    time.Duration `key:"connect_retry"`
	ConnectRetryMax time.Duration `key:"connect_retry_max"`
	ConnectRetries  int           `key:"connect_retries"`
	// MaxQPs bounds the endpoint's QPs (every state): a REQ beyond it is
	// rejected (REJ, no QP) and Connect fails. It bounds the tables a
	// peer's REQs can grow, nothing else of RoCEv2 changes. Default 65536.
	MaxQPs int `key:"max_qps"`

	// QPNBase is the first QP number allocated; numbers are unique per
	// endpoint and never 0 or 1. Default 0x100.
	QPNBase uint32
	// PSNSeed seeds the starting PSN of each QP (a hash of seed and QPN, as
	// NICs pick pseudo-random starting PSNs). Tests set it to exercise the
	// 24-bit wrap.
	PSNSeed uint32

	// LineRateBps is the port's line rate. The endpoint never sends faster
	// (counting FrameOverhead per packet) and DCQCN never exceeds it.
	// Default 100e9.
	LineRateBps float64
	// FrameOverhead is added to each packet's length when pacing: the
	// Ethernet (14 + 4 FCS), IPv4 (20) and UDP (8) headers around the UDP
	// payload the core writes. Default 46.
	FrameOverhead int

	// DCQCN configures congestion control; see DCQCNConfig.
	DCQCN DCQCNConfig `key:"dcqcn"`
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.LocalIP == (IPv4{}) {
		c.LocalIP = IPv4{10, 0, 0, 1}
	}
	if c.PeerIP == nil {
		c.PeerIP = DefaultPeerIP
	}
	setInt(&c.MTU, 4096)
	if c.PKey == 0 {
		c.PKey = DefaultPKey
	}
	if c.AckTimeoutCode == 0 {
		c.AckTimeoutCode = 8
	}
	setInt(&c.RetryCount, 7)
	setInt(&c.RNRRetry, 7)
	if c.MinRNRTimer == 0 {
		c.MinRNRTimer = 12
	}
	setInt(&c.AckReqEvery, 8)
	setInt(&c.MaxRdAtomic, 16)
	setInt(&c.SendQueueDepth, 4096)
	setInt(&c.RecvQueueDepth, 4096)
	if c.ConnectRetry == 0 {
		c.ConnectRetry = time.Millisecond
	}
	if c.ConnectRetryMax == 0 {
		c.ConnectRetryMax = max(100*time.Millisecond, c.ConnectRetry)
	}
	setInt(&c.ConnectRetries, 15)
	setInt(&c.MaxQPs, 65536)
	if c.QPNBase == 0 {
		c.QPNBase = 0x100
	}
	if c.LineRateBps == 0 {
		c.LineRateBps = 100e9
	}
	setInt(&c.FrameOverhead, 46)
	c.DCQCN = c.DCQCN.Defaults()
	return c
}

// cfgErr is a Config field out of range, as a *verbs.ConfigError (Field
// is its Go name, dotted into DCQCN: "DCQCN.G").
func cfgErr(field, format string, args ...any) error {
	return &verbs.ConfigError{Core: "rocev2", Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first field out of range, by name (a *verbs.ConfigError).
func (c Config) Validate() error {
	if mtuCode(c.MTU) == 0 {
		return cfgErr("MTU", "= %d, want 256, 512, 1024, 2048 or 4096", c.MTU)
	}
	type rng struct {
		name      string
		v, lo, hi int
	}
	for _, r := range []rng{
		{"AckTimeoutCode", int(c.AckTimeoutCode), 1, 31},
		{"RetryCount", c.RetryCount, 0, 255},
		{"RNRRetry", c.RNRRetry, 0, 7},
		{"MinRNRTimer", int(c.MinRNRTimer), 0, 31},
		{"AckReqEvery", c.AckReqEvery, 1, 1 << 16},
		{"MaxRdAtomic", c.MaxRdAtomic, 1, 255},
		{"SendQueueDepth", c.SendQueueDepth, 1, 1 << 20},
		{"RecvQueueDepth", c.RecvQueueDepth, 1, 1 << 20},
		{"ConnectRetries", c.ConnectRetries, 1, 1000},
		{"MaxQPs", c.MaxQPs, 1, PSNMask - 2},
		{"FrameOverhead", c.FrameOverhead, 0, 1 << 10},
	} {
		if r.v < r.lo || r.v > r.hi {
			return cfgErr(r.name, "= %d, want %d..%d", r.v, r.lo, r.hi)
		}
	}
	if c.QPNBase < 2 || c.QPNBase > PSNMask {
		return cfgErr("QPNBase", "= %#x, want 2..0xFFFFFF", c.QPNBase)
	}
	if c.ConnectRetry <= 0 {
		return cfgErr("ConnectRetry", "= %v, want > 0", c.ConnectRetry)
	}
	if c.ConnectRetryMax < c.ConnectRetry {
		return cfgErr("ConnectRetryMax", "= %v is below ConnectRetry = %v", c.ConnectRetryMax, c.ConnectRetry)
	}
	if !(c.LineRateBps > 0) || c.LineRateBps > 1e13 {
		return cfgErr("LineRateBps", "= %v, want > 0 and <= 1e13", c.LineRateBps)
	}
	return c.DCQCN.Validate()
}
