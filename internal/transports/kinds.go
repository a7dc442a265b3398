// Package transports is the table of transport kinds the front ends build
// their transport from: the CLI (cmd/metaroce) and the verbs library
// (libverbs/golib). It is the one place outside the simulator that knows
// how a profile's transport becomes a verbs.Device; everything else runs
// the device through the verbs interfaces.
package transports

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/engine"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// Options says how a front end wants its device.
type Options struct {
	// Server: the device accepts connections (the CLI's server node).
	Server bool
	// ID is the metaroce node id (its endpoint ids and keys are random).
	ID mr.NodeID
	// Paths overrides the profile's metaroce.paths when not 0 (transports
	// without paths ignore it).
	Paths int
	// Depth is the most work requests a queue pair holds (at least 4096).
	Depth int
	// Verbs: the device serves the verbs library, where each program
	// connects its QPs itself after its own out-of-band exchange. metaroce
	// then accepts on both ends (the lower address dials), carries one
	// stream per QP pair (up to 65535), stretches its CONNECT budget for
	// peers that reach RTR seconds apart (VerbsConnect) and keeps its
	// peer-dead timer at 2 s at least (each QP has its own budgets);
	// rocev2 accepts no CM REQ (its QPs are opened with OpenQP).
	Verbs bool
}

// OpenQP opens, on a device of the kind, the core QP of a verbs QP
// connected one to one out of band: qpn is this QP's number (the wire's),
// rqpn the peer's, rqPSN the peer's first PSN (RTR); setSendPSN takes
// this QP's first PSN (RTS).
type OpenQP func(d verbs.Device, now verbs.Time, peer verbs.PeerHandle, qpn, rqpn, rqPSN uint32,
	attr verbs.QPAttr) (q verbs.QP, setSendPSN func(uint32) error, err error)

// Kind is what a front end needs to know about one transport beyond the
// verbs interfaces.
type Kind struct {
	// NewDevice builds the transport on backend be.
	NewDevice func(cfg profile.Config, be engine.Backend, o Options) (verbs.Device, error)
	// OpenQP is nil for a transport whose verbs QPs are streams of one
	// session per peer process (metaroce): the verbs library dials and
	// accepts those; else it opens each QP with it (rocev2: one RC
	// connection is one QP, as on an HCA).
	OpenQP OpenQP
	// Port is the UDP port the transport listens on, from the profile.
	Port func(cfg profile.Config) int
	// UDPPort is the UDP port when the profile leaves dpdk.udp_port at 0.
	UDPPort uint16
	// UDPChecksum is dpdk.udp_checksum when the profile leaves it empty:
	// "zero" where the transport's own CRC covers every packet end to
	// end and nothing relies on the UDP checksum, else "compute".
	UDPChecksum string
	// MTU is the payload MTU the profile gives the transport.
	MTU func(cfg profile.Config) int
	// OnePath: a queue pair keeps one UDP source port (one ECMP path).
	OnePath bool
}

// Kinds are the transports, by the profile's name.
var Kinds = map[profile.Transport]Kind{
	profile.TransportMetaroce: {
		NewDevice: func(cfg profile.Config, _ engine.Backend, o Options) (verbs.Device, error) {
			mc := cfg.Metaroce.Core()
			// Ids, keys and the incarnation from the OS's cryptographic
			// generator: this endpoint faces a real network (issue 15).
			mc.Node, mc.Incarnation, mc.Rand = o.ID, 0, engine.SecureRandom()
			mc.Paths, mc.AcceptIncoming = cfg.Metaroce.Paths, o.Server
			if o.Paths != 0 {
				mc.Paths = o.Paths
			}
			mc.SendQueueDepth, mc.RecvQueueDepth = max(4096, o.Depth), max(4096, o.Depth)
			// security.mode auth or encrypt (docs/security.md): the master
			// secret is the PSK's own (profile.Security.Secret). The verbs
			// library keeps it (no control channel of ours exists there:
			// each connection's keys still differ, derived with both ends'
			// random hellos of CONNECT and ACCEPT); perf replaces it with
			// the outcome of its X25519 exchange before it connects
			// (cmd/metaroce/perf_keys.go).
			if mc.Security = cfg.Security.Core(); mc.Security.Mode != mr.SecurityNone {
				var err error
				if mc.Security.Secret, err = cfg.Security.Secret(); err != nil {
					return nil, err
				}
			}
			if o.Verbs {
				mc.AcceptIncoming = true
				mc.Streams = 65535 // stream = lo << 8 | hi of the QP pair's indices
				VerbsConnect(&mc)
				mc.PeerDeadTimeout = max(mc.PeerDeadTimeout, 2*time.Second)
			}
			ep, err := mr.NewEndpoint(mc)
			if err != nil {
				return nil, err
			}
			return ep.Device(), nil
		},
		Port:        func(cfg profile.Config) int { return cfg.UDP.Port },
		UDPPort:     mr.DefaultUDPPort,
		UDPChecksum: "zero", // the CRC32C trailer covers every packet (docs/protocol.md)
		MTU:         func(cfg profile.Config) int { return cfg.Metaroce.MTU },
	},
	profile.TransportRoCEv2: {
		NewDevice: func(cfg profile.Config, be engine.Backend, o Options) (verbs.Device, error) {
			c := cfg.RoCEv2.Core()
			c.LocalIP, c.PeerIP = be.LocalIP(), func(h verbs.PeerHandle) rocev2.IPv4 { return be.PeerIP(h) }
			c.AcceptIncoming = o.Server && !o.Verbs
			c.SendQueueDepth, c.RecvQueueDepth = max(4096, o.Depth), max(4096, o.Depth)
			ep, err := rocev2.NewEndpoint(c)
			if err != nil {
				return nil, err
			}
			return ep.Device(), nil
		},
		OpenQP:      rocev2Open,
		Port:        func(cfg profile.Config) int { return cfg.UDP.RoCEv2Port },
		UDPPort:     rocev2.UDPPort,
		UDPChecksum: "compute", // the baseline as it ran before (see docs/dpdk.md)
		MTU:         func(cfg profile.Config) int { return cfg.RoCEv2.MTU },
		OnePath:     true,
	},
}

// Of returns the transport t, or an error naming it.
func Of(t profile.Transport) (Kind, error) {
	k, ok := Kinds[t]
	if !ok {
		return Kind{}, fmt.Errorf("transport %q", t)
	}
	return k, nil
}

// VerbsConnect raises a CONNECT budget to what verbs peers need: they
// reach RTR seconds apart, each after its own out-of-band exchange, and a
// loaded machine delays answers (the CLI's lock-step defaults are too
// tight there). The interval stays fixed (ConnectRetryMax = ConnectRetry,
// no doubling): the peer reaches RTR at any moment within those seconds and
// should be found within 10 ms of it.
func VerbsConnect(mc *mr.Config) {
	mc.ConnectRetry = max(mc.ConnectRetry, 10*time.Millisecond)
	mc.ConnectRetryMax = mc.ConnectRetry
	mc.ConnectRetries = max(mc.ConnectRetries, 1000)
}

// directOpener is the rocev2 device's OpenQP (promoted from its endpoint).
type directOpener interface {
	OpenQP(now verbs.Time, peer verbs.PeerHandle, d rocev2.DirectQP) (*rocev2.QueuePair, error)
}

// rocev2Open opens a QP with rocev2's OpenQP: the QPNs and PSNs the
// programs exchanged, no CM message.
func rocev2Open(d verbs.Device, now verbs.Time, peer verbs.PeerHandle, qpn, rqpn, rqPSN uint32,
	attr verbs.QPAttr) (verbs.QP, func(uint32) error, error) {
	o, ok := d.(directOpener)
	if !ok {
		return nil, nil, fmt.Errorf("transports: %T is not a rocev2 device", d)
	}
	q, err := o.OpenQP(now, peer, rocev2.DirectQP{QPN: qpn, RemoteQPN: rqpn, RecvPSN: rocev2.PSN(rqPSN), Attr: attr})
	if err != nil {
		return nil, nil, err
	}
	return q, func(psn uint32) error { return q.SetSendPSN(rocev2.PSN(psn)) }, nil
}

// UDPPortFor is the UDP port of transport t when the profile leaves
// dpdk.udp_port at 0: metaroce's 4794, or the IANA RoCEv2 port.
func UDPPortFor(t profile.Transport) uint16 {
	if k, ok := Kinds[t]; ok {
		return k.UDPPort
	}
	return mr.DefaultUDPPort
}
