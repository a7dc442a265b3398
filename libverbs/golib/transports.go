//go:build cgo

package main

import (
	"time"

	"github.com/metaroce/metaroce/engine"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// transport is the core a verbs process runs: its device, and, for a
// transport whose QPs are connected one to one out of band as an HCA's
// are (rocev2), how to open one. open nil: one session per peer process,
// one stream per QP pair (metaroce).
type transport struct {
	dev  verbs.Device
	open openQP
}

// openQP opens the core QP of verbs QP qpn (the QPN the library assigned,
// which the wire carries) to the peer's QP rqpn at RTR, expecting the
// peer's first PSN rqPSN; setSendPSN takes the QP's own first PSN at RTS.
type openQP func(now verbs.Time, peer verbs.PeerHandle, qpn, rqpn, rqPSN uint32, attr verbs.QPAttr) (q verbs.QP, setSendPSN func(uint32) error, err error)

// deviceKinds builds the transport a verbs process runs. It belongs with
// cmd/metaroce/transports.go's map (the one place naming the kinds), which
// is package main and so not importable; until both read one importable
// table, this is the library's entry for each kind.
var deviceKinds = map[profile.Transport]kind{
	profile.TransportMetaroce: {udpPort: mr.DefaultUDPPort, udpChecksum: "zero", newTransport: func(cfg profile.Config, be engine.Backend, id mr.NodeID) (transport, error) {
		mc := cfg.Metaroce.Core()
		// Ids, keys and the incarnation from the OS's cryptographic
		// generator: this endpoint faces a real network (issue 15).
		mc.Node, mc.Incarnation, mc.Rand = id, 0, engine.SecureRandom()
		// Both ends accept: which end dials depends on the addresses.
		mc.AcceptIncoming = true
		// Streams carry the QP pair's indices (stream = lo << 8 | hi).
		mc.Streams = 65535
		mc.SendQueueDepth, mc.RecvQueueDepth = maxQPWR, maxQPWR
		// Verbs peers reach RTR seconds apart (each after its own
		// out-of-band exchange), and a loaded machine delays answers:
		// the CLI's lock-step defaults are too tight here.
		verbsConnect(&mc)
		// The connection's peer-dead timer, for the whole process pair;
		// each QP is held to its own timeout x (retry_cnt+1) and
		// rnr_retry (verbs.QPTimers, set at RTR and RTS).
		mc.PeerDeadTimeout = max(mc.PeerDeadTimeout, 2*time.Second)
		ep, err := mr.NewEndpoint(mc)
		if err != nil {
			return transport{}, err
		}
		return transport{dev: ep.Device()}, nil
	}},
	// RoCEv2: one RC connection is one QP, so each verbs QP is one core
	// QP, opened at RTR with the QPNs and PSNs the programs exchanged, as
	// an HCA's: no CM message, the peer's QPN in every BTH. Nothing
	// accepts CM REQs (nothing sends one).
	profile.TransportRoCEv2: {udpPort: rocev2.UDPPort, udpChecksum: "compute", newTransport: func(cfg profile.Config, be engine.Backend, _ mr.NodeID) (transport, error) {
		c := cfg.RoCEv2.Core()
		c.LocalIP, c.PeerIP = be.LocalIP(), func(h verbs.PeerHandle) rocev2.IPv4 { return be.PeerIP(h) }
		c.AcceptIncoming = false
		c.SendQueueDepth, c.RecvQueueDepth = maxQPWR, maxQPWR
		ep, err := rocev2.NewEndpoint(c)
		if err != nil {
			return transport{}, err
		}
		open := func(now verbs.Time, peer verbs.PeerHandle, qpn, rqpn, rqPSN uint32, attr verbs.QPAttr) (verbs.QP, func(uint32) error, error) {
			q, err := ep.OpenQP(now, peer, rocev2.DirectQP{QPN: qpn, RemoteQPN: rqpn, RecvPSN: rocev2.PSN(rqPSN), Attr: attr})
			if err != nil {
				return nil, nil, err
			}
			return q, func(psn uint32) error { return q.SetSendPSN(rocev2.PSN(psn)) }, nil
		}
		return transport{dev: ep.Device(), open: open}, nil
	}},
}

// kind is the library's entry for one transport: how to build it on a
// backend, and the DPDK backend's defaults for it (the CLI's: the UDP
// port when dpdk.udp_port is 0, dpdk.udp_checksum when empty).
type kind struct {
	newTransport func(cfg profile.Config, be engine.Backend, id mr.NodeID) (transport, error)
	udpPort      uint16
	udpChecksum  string
}

// verbsConnect raises a CONNECT budget to what verbs peers need: they
// reach RTR seconds apart, each after its own out-of-band exchange.
func verbsConnect(mc *mr.Config) {
	mc.ConnectRetry = max(mc.ConnectRetry, 10*time.Millisecond)
	mc.ConnectRetries = max(mc.ConnectRetries, 1000)
}

// acceptWait is how long a QP on the accepting side (the higher address)
// waits at RTR for its peer's connection before its work fails: the
// dialer's whole CONNECT budget, and a second for the last attempt to
// arrive. A dialer that has not connected by then has given up itself.
func acceptWait(cfg profile.Config) time.Duration {
	mc := cfg.Metaroce.Core()
	verbsConnect(&mc)
	return mc.ConnectRetry*time.Duration(mc.ConnectRetries) + time.Second
}
