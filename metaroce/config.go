package metaroce

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Config holds an endpoint's protocol parameters. The zero value of a field
// means "use the default"; Defaults documents every default and Validate
// names the field that is out of range.
//
// The `key` tags name each tunable parameter, once for both front ends:
// the profiles (metaroce.<key>) and the experiment files
// (transport.metaroce.<key>) derive their keys from them (internal/keys).
// A field without a tag is the program's to set (identity, the link rate
// the backend knows, AcceptIncoming, the queue depths).
type Config struct {
	// Node and Incarnation identify this endpoint; a restarted endpoint must
	// use a new Incarnation so peers can tell it from its previous life.
	Node        NodeID
	Incarnation Incarnation

	// Rand is where the endpoint draws what an outsider must not guess:
	// connection ids, memory keys and region addresses, and Incarnation
	// when it is 0 (from which every path's initial PSNs follow, §8.1 of
	// docs/protocol.md). A backend facing a real network passes a
	// cryptographic source (engine.SecureRandom). nil: a deterministic
	// source seeded from Node and Incarnation (verbs.NewSeededRandom), so
	// that simulations and tests are reproducible; such an endpoint's
	// values are predictable to anyone who knows its configuration, and a
	// restarted one with Incarnation 0 comes back with the same one.
	Rand verbs.Random

	// Security selects mode none (the CRC32C), auth or encrypt and holds
	// their secret (keys.go, seal.go; docs/security.md).
	Security Security

	// Paths per connection (1..256), proposed at connect time; the connection
	// uses the smaller of both sides' values. Default 8.
	Paths int `key:"paths"`
	// Planes the paths are spread over (1..16). Default 1.
	Planes int `key:"planes"`
	// MTU is the payload carried per data packet (256..9000). Default 4096.
	MTU int `key:"mtu"`
	// Streams is the largest number of streams per connection. Default 1024.
	Streams int `key:"streams"`
	// EntropyBase is the UDP source port of path 0; path i uses
	// EntropyBase+i. Default 49152.
	EntropyBase verbs.Entropy `key:"entropy_base"`

	// PathWindow is the most packets a path may have in flight (1..256:
	// the SACK bitmap covers 256 PSNs), and the window a path starts with.
	// Congestion control (cc.go) moves each path's window between
	// MinWindow and PathWindow. Default 64.
	PathWindow int `key:"path_window"`
	// MinWindow is the smallest window ECN marks can cut a path to, in
	// packets (1..PathWindow). Default 1.
	MinWindow int `key:"min_window"`
	// ECNGain is the weight of the newest round in a path's marked fraction
	// (DCTCP's g, (0, 1]); a marked round cuts the window by half that
	// fraction. Default 1/16.
	ECNGain float64 `key:"ecn_gain"`
	// DisableCC turns every congestion mechanism off (fixed windows, no
	// rate hints, no pacing): for experiments that isolate loss repair.
	DisableCC bool `key:"disable_cc"`

	// LinkRateBps is the rate this endpoint can receive at, all planes
	// together, in bits per second. The receiver divides it among its
	// active senders (max-min fair, honouring smaller demands) and returns
	// each sender's share in every ACK; 0 means unknown: no rate hints.
	// The backend knows it (the simulator's NIC, a DPDK port's link speed).
	LinkRateBps float64
	// HintUtilization is the fraction of LinkRateBps the shares of two or
	// more senders add up to ((0, 1]), leaving headroom for framing and
	// for packets of independent senders arriving together (a lone sender
	// gets the whole link). Default 0.97.
	HintUtilization float64 `key:"hint_utilization"`
	// HintInterval is the shortest interval over which the receiver
	// measures each sender's rate (it is stretched so that a sender at its
	// fair share sends at least 4 packets in it). Default 16µs.
	HintInterval time.Duration `key:"hint_interval"`
	// InflightRTTs caps the bytes a connection has in flight at this many
	// times its rate hint × (its smoothed RTT, at most 4 × its smallest,
	// + AckDelay) (at least one packet), so that a burst already in the
	// fabric drains before new packets join it. Above 1 it leaves room for
	// losses not yet detected (they still count as in flight). Default 4.
	InflightRTTs float64 `key:"inflight_rtts"`
	// InitialInflight is how many packets a connection may have in flight
	// before its first ACK (with the receiver's first rate hint) arrives.
	// N senders starting together put N·InitialInflight packets in the
	// receiver's queue before anyone has heard from it; 1 keeps a 32:1
	// incast within one BDP and costs a new connection one RTT on its
	// first multi-packet message. Default 1.
	InitialInflight int `key:"initial_inflight"`
	// AckEvery: acknowledge a path after this many packets. Default 8.
	AckEvery int `key:"ack_every"`
	// AckDelay: acknowledge at the latest this long after the first
	// unacknowledged packet (a receiver with an empty queue holds the ACKs
	// of a sender with a small share up to 4 × AckDelay: fairShare.ackHold).
	// Default 5µs.
	AckDelay time.Duration `key:"ack_delay"`

	// InitialRTO is the tail-loss timeout before any RTT sample. Default 1ms.
	InitialRTO time.Duration `key:"initial_rto"`
	// MinRTO and MaxRTO bound the tail-loss timeout. Defaults 50µs, 100ms.
	MinRTO time.Duration `key:"min_rto"`
	MaxRTO time.Duration `key:"max_rto"`
	// PathFailAfter: consecutive tail-loss timeouts without progress before
	// a congested path (one that saw ECN marks or rising RTT lately) is
	// judged failed and its packets move to other paths. A path with no
	// sign of congestion whose ACKs stall is judged failed at its first
	// timeout (health.go). Default 3.
	PathFailAfter int `key:"path_fail_after"`
	// PathReprobe is the first back-off before a failed path is probed
	// again; it doubles, up to MaxRTO*4, while the path keeps failing
	// soon after it is restored. Default 200µs.
	PathReprobe time.Duration `key:"path_reprobe"`
	// PathLossFail: a path whose recent loss rate (an average over about
	// 32 packets) exceeds this fraction and three times its siblings'
	// average is judged failed, as long as another path is healthy
	// ((0, 1]). Default 0.4.
	PathLossFail float64 `key:"path_loss_fail"`
	// RerollRounds: a path whose marked fraction stays above 0.5 (and
	// four times its siblings' average) for this many rounds in a row takes
	// a new entropy (UDP source port), hoping for an uncongested route; its
	// sequence space restarts. 0 takes the default, 8; -1 disables.
	RerollRounds int `key:"reroll_rounds"`

	// RNRRetries: how often a SEND is retried after receiver-not-ready
	// before it fails (7 = as ibv's maximum finite count). Default 7.
	RNRRetries int `key:"rnr_retries"`
	// RNRBackoff is the first RNR back-off; it doubles on every retry.
	// Default 100µs.
	RNRBackoff time.Duration `key:"rnr_backoff"`

	// KeepaliveInterval: send a keepalive when nothing arrived for this
	// long. Default 10ms.
	KeepaliveInterval time.Duration `key:"keepalive_interval"`
	// PeerDeadTimeout: declare the peer dead when nothing arrived for this
	// long; its work requests complete with errors. Default 200ms.
	PeerDeadTimeout time.Duration `key:"peer_dead_timeout"`
	// ConnectRetry is the wait after the first CONNECT before the next;
	// each further wait doubles, up to ConnectRetryMax (verbs.RetryInterval),
	// so a lost answer costs about ConnectRetry while a peer that is not
	// running yet (a listener descheduled on a loaded host) has
	// verbs.RetryBudget to answer: 1.43 s with the defaults. CLOSE attempts
	// keep the fixed ConnectRetry: a peer that misses the CLOSE finds out by
	// its peer-dead timeout. Defaults 1ms and 100ms (or ConnectRetry, if
	// larger).
	ConnectRetry    time.Duration `key:"connect_retry"`
	ConnectRetryMax time.Duration `key:"connect_retry_max"`
	// ConnectRetries: attempts before Connect fails. Default 20.
	ConnectRetries int `key:"connect_retries"`

	// AcceptIncoming makes the endpoint accept CONNECT requests.
	AcceptIncoming bool

	// Admission control (admission.go). MaxConns bounds the endpoint's
	// connections, both directions and every state; a CONNECT beyond it is
	// refused and Connect returns ErrTooManyConns. Default 65536.
	MaxConns int `key:"max_conns"`
	// MaxHalfOpen bounds the inbound connections whose peer has not yet
	// sent a packet on them after our ACCEPT (they hold no path state);
	// past it the oldest is dropped to make room. Default 4096.
	MaxHalfOpen int `key:"max_half_open"`
	// MaxConnsPerPeer bounds the inbound connections from one address;
	// a CONNECT beyond it is refused. Default 16384 (above MaxHalfOpen, so
	// that a flood from one address is held by the half-open bound, which
	// evicts, not by this one, which refuses).
	MaxConnsPerPeer int `key:"max_conns_per_peer"`
	// AcceptBacklog bounds the connections accepted but not yet taken by
	// the application (Accept); a CONNECT beyond it is refused. Default
	// MaxConns (the queue never holds a dead or an evicted connection).
	AcceptBacklog int `key:"accept_backlog"`
	// ResetRate and ResetBurst limit the RESETs (for unknown connections,
	// and refusals of CONNECTs) the endpoint sends: a token bucket of
	// ResetBurst tokens refilled at ResetRate per second. Defaults 10000/s,
	// 256.
	ResetRate  float64 `key:"reset_rate"`
	ResetBurst int     `key:"reset_burst"`

	// SendQueueDepth and RecvQueueDepth bound the outstanding work requests
	// per queue pair. Defaults 4096 and 4096.
	SendQueueDepth int
	RecvQueueDepth int
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&c.Paths, 8)
	setInt(&c.Planes, 1)
	setInt(&c.MTU, 4096)
	setInt(&c.Streams, 1024)
	if c.EntropyBase == 0 {
		c.EntropyBase = 49152
	}
	setInt(&c.PathWindow, 64)
	setInt(&c.MinWindow, 1)
	setFloat := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	setFloat(&c.ECNGain, 1.0/16)
	setFloat(&c.HintUtilization, 0.97)
	setDur(&c.HintInterval, 16*time.Microsecond)
	setFloat(&c.InflightRTTs, 4)
	setFloat(&c.PathLossFail, 0.4)
	setInt(&c.RerollRounds, 8)
	setInt(&c.InitialInflight, 1)
	setInt(&c.AckEvery, 8)
	setDur(&c.AckDelay, 5*time.Microsecond)
	setDur(&c.InitialRTO, time.Millisecond)
	setDur(&c.MinRTO, 50*time.Microsecond)
	setDur(&c.MaxRTO, 100*time.Millisecond)
	setInt(&c.PathFailAfter, 3)
	setDur(&c.PathReprobe, 200*time.Microsecond)
	setInt(&c.RNRRetries, 7)
	setDur(&c.RNRBackoff, 100*time.Microsecond)
	setDur(&c.KeepaliveInterval, 10*time.Millisecond)
	setDur(&c.PeerDeadTimeout, 200*time.Millisecond)
	setDur(&c.ConnectRetry, time.Millisecond)
	setDur(&c.ConnectRetryMax, max(100*time.Millisecond, c.ConnectRetry))
	setInt(&c.ConnectRetries, 20)
	setInt(&c.MaxConns, 65536)
	setInt(&c.MaxHalfOpen, min(4096, c.MaxConns))
	setInt(&c.MaxConnsPerPeer, min(16384, c.MaxConns))
	setInt(&c.AcceptBacklog, c.MaxConns)
	setFloat(&c.ResetRate, 10000)
	setInt(&c.ResetBurst, 256)
	setInt(&c.SendQueueDepth, 4096)
	setInt(&c.RecvQueueDepth, 4096)
	c.Security = c.Security.defaults()
	return c
}

// cfgErr is a Config field out of range, as a *verbs.ConfigError (Field
// is its Go name).
func cfgErr(field, format string, args ...any) error {
	return &verbs.ConfigError{Core: "metaroce", Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first field out of range, by name (a *verbs.ConfigError).
func (c Config) Validate() error {
	type rng struct {
		name      string
		v, lo, hi int
	}
	for _, r := range []rng{
		{"Paths", c.Paths, 1, MaxPaths},
		{"Planes", c.Planes, 1, MaxPlanes},
		{"MTU", c.MTU, MinMTU, MaxMTU},
		{"Streams", c.Streams, 1, 65535},
		{"PathWindow", c.PathWindow, 1, SackBits},
		{"MinWindow", c.MinWindow, 1, c.PathWindow},
		{"RerollRounds", c.RerollRounds, -1, 1 << 16},
		{"InitialInflight", c.InitialInflight, 1, 1 << 20},
		{"AckEvery", c.AckEvery, 1, SackBits},
		{"PathFailAfter", c.PathFailAfter, 1, 64},
		{"RNRRetries", c.RNRRetries, 0, 1000},
		{"ConnectRetries", c.ConnectRetries, 1, 1000},
		{"MaxConns", c.MaxConns, 1, 1 << 24},
		{"MaxHalfOpen", c.MaxHalfOpen, 1, c.MaxConns},
		{"MaxConnsPerPeer", c.MaxConnsPerPeer, 1, c.MaxConns},
		{"AcceptBacklog", c.AcceptBacklog, 1, c.MaxConns},
		{"ResetBurst", c.ResetBurst, 1, 1 << 20},
		{"SendQueueDepth", c.SendQueueDepth, 1, 1 << 20},
		{"RecvQueueDepth", c.RecvQueueDepth, 1, 1 << 20},
	} {
		if r.v < r.lo || r.v > r.hi {
			return cfgErr(r.name, "= %d, want %d..%d", r.v, r.lo, r.hi)
		}
	}
	if int(c.EntropyBase)+c.Paths > 65536 {
		return cfgErr("EntropyBase", "= %d leaves no room for %d paths", c.EntropyBase, c.Paths)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"AckDelay", c.AckDelay}, {"InitialRTO", c.InitialRTO}, {"MinRTO", c.MinRTO},
		{"MaxRTO", c.MaxRTO}, {"PathReprobe", c.PathReprobe}, {"RNRBackoff", c.RNRBackoff},
		{"KeepaliveInterval", c.KeepaliveInterval}, {"PeerDeadTimeout", c.PeerDeadTimeout},
		{"ConnectRetry", c.ConnectRetry}, {"ConnectRetryMax", c.ConnectRetryMax}, {"HintInterval", c.HintInterval},
	} {
		if d.v <= 0 {
			return cfgErr(d.name, "= %v, want > 0", d.v)
		}
	}
	for _, f := range []struct {
		name      string
		v, lo, hi float64
	}{
		{"ECNGain", c.ECNGain, 0, 1}, {"HintUtilization", c.HintUtilization, 0, 1},
		{"PathLossFail", c.PathLossFail, 0, 1}, {"InflightRTTs", c.InflightRTTs, 0, 1000},
		{"ResetRate", c.ResetRate, 0, 1e9},
	} {
		if !(f.v > f.lo && f.v <= f.hi) {
			return cfgErr(f.name, "= %v, want (%v, %v]", f.v, f.lo, f.hi)
		}
	}
	if !(c.LinkRateBps >= 0 && c.LinkRateBps < 1e15) {
		return cfgErr("LinkRateBps", "= %v, want 0 (unknown) or a rate in bit/s", c.LinkRateBps)
	}
	if c.ConnectRetry > c.ConnectRetryMax {
		return cfgErr("ConnectRetryMax", "= %v is below ConnectRetry = %v", c.ConnectRetryMax, c.ConnectRetry)
	}
	if c.MinRTO > c.MaxRTO {
		return cfgErr("MinRTO", "= %v exceeds MaxRTO = %v", c.MinRTO, c.MaxRTO)
	}
	if err := c.Security.validate(c.Rand); err != nil {
		return err
	}
	if c.KeepaliveInterval >= c.PeerDeadTimeout {
		return cfgErr("KeepaliveInterval", "= %v must be below PeerDeadTimeout = %v", c.KeepaliveInterval, c.PeerDeadTimeout)
	}
	return nil
}
