//go:build dpdk

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/internal/transports"
	"github.com/metaroce/metaroce/profile"
)

// The DPDK backend in the command: the profile's dpdk section is the
// engine's configuration (engine/dpdkengine.Config). A process starts the
// EAL and its engines once (dpdkHost); each node then runs its transport
// on a shard of an engine (dpdkengine.Backend, an engine.Backend): the
// node's application step (post work, poll completions) runs on the
// shard's loop once per iteration. The shard's burst path is the
// engine's: one cgo call per iteration, no allocation.

// engineConfig converts the profile's dpdk section (ports[from:to]) into
// the engine's configuration (internal/transports, which the verbs
// library shares).
func engineConfig(d profile.DPDK, from, to int, t profile.Transport) dpdkengine.Config {
	return transports.EngineConfig(d, from, to, t)
}

// udpPortFor is the UDP port of a transport when the profile leaves
// dpdk.udp_port at 0: metaroce's 4794, or the IANA RoCEv2 port.
func udpPortFor(t profile.Transport) uint16 { return transports.UDPPortFor(t) }

// checkDPDK validates the dpdk section with the engine's own rules; the
// error names the profile key (dpdk.ports[0].ip) and the file.
func checkDPDK(cfg profile.Config, name string) error {
	if cfg.Backend != profile.BackendDPDK {
		return nil
	}
	c := engineConfig(cfg.DPDK, 0, len(cfg.DPDK.Ports), cfg.Transport)
	err := c.Validate()
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		err = j.Unwrap()[0] // the first bad key: one line
	}
	msg := strings.TrimPrefix(err.Error(), "dpdk config: ")
	return cfgErr("metaroce: %s: key dpdk.%s", name, msg)
}

// dpdkHost is the EAL and the engines of this process: one for perf (all
// the profile's ports), two for bench (ports[0] for the server node,
// ports[1] for the client).
type dpdkHost struct {
	engs []*dpdkengine.Engine
	// peerFirst: on shutdown, wait (bounded) until the peer process has
	// closed its end of a memif port before closing ours. Set for perf's
	// server, which ends with its client: were both to close at once, the
	// EAL interrupt thread handling the peer's disconnect races our port
	// close (seen as a segfault, docs/dpdk.md Pitfalls).
	peerFirst bool
}

// startDPDK starts the EAL (with the profile's eal arguments followed by
// extra, those given after "--") and the engines. Warnings (--no-huge)
// go to warn. Links are not waited for here: a memif server's link comes
// up only when its peer process starts, so each node waits when it
// attaches (after the setup exchange brought both up).
func startDPDK(cfg profile.Config, extra []string, bench bool, warn io.Writer) (*dpdkHost, error) {
	d := cfg.DPDK
	d.EAL = append(append([]string(nil), d.EAL...), extra...)
	// --no-huge works: the mbuf pool then lives in anonymous memory and
	// the mempool package warns so on warn.
	spans := [][2]int{{0, len(d.Ports)}}
	if bench {
		if len(d.Ports) != 2 {
			return nil, cfgErr("metaroce: bench over DPDK needs two ports in dpdk.ports (server node on ports[0], client on ports[1]), the profile has %d", len(d.Ports))
		}
		spans = [][2]int{{0, 1}, {1, 2}}
	}
	h := &dpdkHost{}
	for _, s := range spans {
		e, err := dpdkengine.Start(engineConfig(d, s[0], s[1], cfg.Transport), warn)
		if err != nil {
			h.shutdown()
			if strings.Contains(err.Error(), "net_memif") && strings.Contains(err.Error(), "rte_eth_dev_start") {
				// A memif client cannot start before its server listens.
				return nil, fmt.Errorf("%w (a memif client port starts only once the other end's process runs: start the server first)", err)
			}
			return nil, err // "dpdk: ..." or "dpdk engine: ..." already
		}
		h.engs = append(h.engs, e)
	}
	return h, nil
}

// opener returns the opener of this host's nodes: in bench the server
// node gets engine 0 and the client engine 1; perf's one node engine 0.
// Each open sets the engine's UDP port for the transport (unless the
// profile fixed it) and its impairment.
func (h *dpdkHost) opener(cfg profile.Config) opener {
	return func(t profile.Transport, server bool) (engine.Backend, error) {
		e := h.engs[0]
		if len(h.engs) == 2 && !server {
			e = h.engs[1]
		}
		port := uint16(cfg.DPDK.UDPPort)
		if port == 0 {
			port = udpPortFor(t)
		}
		if err := e.SetUDPPort(port); err != nil {
			return nil, err
		}
		im := cfg.DPDK.Impair
		if err := e.SetImpairment(dpdkengine.Impairment{Loss: im.Loss, Reorder: im.Reorder, Seed: uint64(im.Seed)}); err != nil {
			return nil, err
		}
		return e.Backend(), nil
	}
}

// shutdown closes the engines and ends the EAL. With two engines (bench
// over a memif pair) the client's engine closes first and the server's
// only once its link is down: memif's disconnect handling races with a
// port close in the same process (docs/dpdk.md, Pitfalls).
func (h *dpdkHost) shutdown() error {
	if h == nil {
		return nil
	}
	var errs []error
	for _, e := range h.engs {
		e.Stop()
	}
	if h.peerFirst && len(h.engs) == 1 && hasMemif(h.engs[0]) {
		if h.engs[0].WaitLinkDown(3*time.Second) == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := len(h.engs) - 1; i >= 0; i-- {
		if i < len(h.engs)-1 {
			// Not a memif pair when the link stays up: close anyway.
			if h.engs[i].WaitLinkDown(2*time.Second) == nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
		errs = append(errs, h.engs[i].Close())
	}
	if dpdk.Initialized() {
		errs = append(errs, dpdk.Cleanup())
	}
	h.engs = nil
	return errors.Join(errs...)
}

// hasMemif reports whether the engine drives a memif port.
func hasMemif(e *dpdkengine.Engine) bool {
	for _, p := range e.Ports() {
		if strings.HasPrefix(p.Name, "net_memif") {
			return true
		}
	}
	return false
}
