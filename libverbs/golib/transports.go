//go:build cgo

package main

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/internal/transports"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
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

// newTransport builds the profile's transport on be from the table the
// CLI uses too (internal/transports), as the verbs library needs it
// (Options.Verbs: both ends accept, a stream per QP pair, the connect
// budget of peers that reach RTR seconds apart; rocev2's QPs opened one
// to one).
func newTransport(cfg profile.Config, be engine.Backend, id mr.NodeID) (transport, error) {
	k, err := transports.Of(cfg.Transport)
	if err != nil {
		return transport{}, fmt.Errorf("%v is not supported by the verbs library", err)
	}
	dev, err := k.NewDevice(cfg, be, transports.Options{ID: id, Depth: maxQPWR, Verbs: true})
	if err != nil {
		return transport{}, err
	}
	t := transport{dev: dev}
	if k.OpenQP != nil {
		t.open = func(now verbs.Time, peer verbs.PeerHandle, qpn, rqpn, rqPSN uint32, attr verbs.QPAttr) (verbs.QP, func(uint32) error, error) {
			return k.OpenQP(dev, now, peer, qpn, rqpn, rqPSN, attr)
		}
	}
	return t, nil
}

// acceptWait is how long a QP on the accepting side (the higher address)
// waits at RTR for its peer's connection before its work fails: the
// dialer's whole CONNECT budget, and a second for the last attempt to
// arrive. A dialer that has not connected by then has given up itself.
func acceptWait(cfg profile.Config) time.Duration {
	mc := cfg.Metaroce.Core()
	transports.VerbsConnect(&mc)
	return verbs.RetryBudget(mc.ConnectRetry, mc.ConnectRetryMax, mc.ConnectRetries) + time.Second
}
