//go:build cgo

package main

import (
	"time"

	"github.com/metaroce/metaroce/engine"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/verbs"
)

// deviceKinds builds the transport a verbs process runs. It belongs with
// cmd/metaroce/transports.go's map (the one place naming the kinds), which
// is package main and so not importable; until both read one importable
// table, this is the library's entry for each kind it supports. rocev2's
// Device dials a fixed set of QPs per session, which the per-QP connection
// of verbs does not fit yet (docs/verbs.md).
var deviceKinds = map[profile.Transport]func(cfg profile.Config, be engine.Backend, id mr.NodeID) (verbs.Device, error){
	profile.TransportMetaroce: func(cfg profile.Config, be engine.Backend, id mr.NodeID) (verbs.Device, error) {
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
		// security.mode auth or encrypt: no control channel of ours
		// exists (the application exchanges QP numbers its own way), so
		// the master secret is the PSK's own (profile.Security.Secret);
		// each connection's keys still differ, derived with both ends'
		// random hellos of CONNECT and ACCEPT (docs/security.md).
		if mc.Security = cfg.Security.Core(); mc.Security.Mode != mr.SecurityNone {
			var err error
			if mc.Security.Secret, err = cfg.Security.Secret(); err != nil {
				return nil, err
			}
		}
		ep, err := mr.NewEndpoint(mc)
		if err != nil {
			return nil, err
		}
		return ep.Device(), nil
	},
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
