//go:build dpdk

package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/engine/udp"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
)

// The DPDK backend in the command: the profile's dpdk section is the
// engine's configuration (engine/dpdkengine.Config). A process starts the
// EAL and its engines once (dpdkHost); each node then runs its transport
// on a shard of an engine, driven in lock-step (dpdkPath): the node's poll
// loop holds the shard's loan (dpdkengine.Shard.Borrow) while it posts
// work and polls completions, and each Step lets the shard run one
// iteration (transmit, one receive burst per port). The shard's burst
// path is the engine's: one cgo call per burst, no allocation.

// engineConfig converts the profile's dpdk section (ports[from:to]) into
// the engine's configuration, with its defaults applied. The UDP port
// left 0 in the profile follows the transport.
func engineConfig(d profile.DPDK, from, to int, t profile.Transport) dpdkengine.Config {
	c := dpdkengine.Config{EAL: append([]string(nil), d.EAL...), UDPPort: uint16(d.UDPPort), Checksum: d.Checksum,
		Impair:   dpdkengine.Impairment{Loss: d.Impair.Loss, Reorder: d.Impair.Reorder, Seed: uint64(d.Impair.Seed)},
		PoolSize: d.PoolSize, DataRoom: d.DataRoom, Burst: d.Burst, RxDesc: d.RxDesc, TxDesc: d.TxDesc,
		IdleSpin: d.IdleSpin, MaxIdleSleep: d.MaxIdleSleep}
	if c.UDPPort == 0 {
		c.UDPPort = udpPortFor(t)
	}
	for _, p := range d.Ports[from:to] {
		c.Ports = append(c.Ports, dpdkengine.PortConfig{Name: p.Name, IP: p.IP, Gateway: p.Gateway, Queues: p.Queues})
	}
	for _, n := range d.Neighbours {
		c.Neighbours = append(c.Neighbours, dpdkengine.Neighbour{Peer: uint32(n.Peer), IP: n.IP, MAC: n.MAC})
	}
	return c.Defaults()
}

// udpPortFor is the UDP port of a transport when the profile leaves
// dpdk.udp_port at 0: metaroce's 4794, or the IANA RoCEv2 port.
func udpPortFor(t profile.Transport) uint16 {
	if t == profile.TransportRoCEv2 {
		return rocev2.UDPPort
	}
	return mr.DefaultUDPPort
}

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
	return func(t profile.Transport, server bool) (dataPath, error) {
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
		return &dpdkPath{eng: e, port: port}, nil
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

// dpdkPath is a node's data path on a DPDK engine. It belongs to the
// node's goroutine: between Steps that goroutine holds the shard's loan
// and so may touch the transport.
type dpdkPath struct {
	eng   *dpdkengine.Engine
	sh    *dpdkengine.Shard
	port  uint16
	held  bool
	stats udp.Stats
	last  dpdkengine.Counters
}

// Attach waits for the links, starts the shard with t and takes its loan.
func (d *dpdkPath) Attach(t mr.Transport) error {
	if err := d.eng.WaitLink(15 * time.Second); err != nil {
		return err
	}
	sh, err := d.eng.Run(t)
	if err != nil {
		return err
	}
	d.sh = sh
	if err := sh.Borrow(); err != nil {
		return err
	}
	d.held = true
	return nil
}

// stepIterations is how many busy shard iterations one Step allows: the
// node posts and polls between bursts of up to this many (each moves up
// to a burst of packets per port); an idle shard hands back at once.
const stepIterations = 32

// Step lets the shard run up to stepIterations busy iterations (timers, transmit, a receive
// burst) and takes the loan back; wait is not needed: the shard polls.
func (d *dpdkPath) Step(time.Duration) (bool, error) {
	if d.sh == nil {
		return false, errors.New("dpdk: no transport attached")
	}
	d.sh.ReleaseFor(stepIterations)
	d.held = false
	if err := d.sh.Borrow(); err != nil {
		if e := d.sh.Err(); e != nil {
			err = e
		}
		return false, err
	}
	d.held = true
	c := d.sh.CountersLent()
	moved := c.TxFrames != d.last.TxFrames || c.RxFrames != d.last.RxFrames
	d.last = c
	return moved, nil
}

// Now is the shard's clock (the engine's before Attach: unused then).
func (d *dpdkPath) Now() mr.Time {
	if d.sh == nil {
		return 0
	}
	return d.sh.Now()
}

// AddPeer adds the peer's data-path address, as the setup exchange gave
// it: an IPv4 address on the port's network, and the engine's UDP port.
func (d *dpdkPath) AddPeer(addr netip.AddrPort) (mr.PeerHandle, error) {
	if !addr.Addr().Is4() {
		return 0, fmt.Errorf("dpdk: peer %v: IPv4 only", addr)
	}
	if addr.Port() != d.port {
		return 0, fmt.Errorf("dpdk: peer %v listens on UDP port %d, this end on %d: set the same dpdk.udp_port on both", addr, addr.Port(), d.port)
	}
	return d.eng.AddPeer(addr.Addr().As4())
}

func (d *dpdkPath) PeerIP(h mr.PeerHandle) [4]byte {
	ip, _ := d.eng.PeerIP(h)
	return ip
}

func (d *dpdkPath) LocalIP() [4]byte { return d.eng.Ports()[0].IP }

func (d *dpdkPath) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(d.LocalIP()), d.port)
}

// SetCapture: --pcap is refused with backend dpdk before a node opens.
func (d *dpdkPath) SetCapture(udp.Capture) {}

// Stats maps the shard's counters onto the backend counters the command
// reports (as of the last Step).
func (d *dpdkPath) Stats() *udp.Stats {
	c := d.last
	if d.held {
		c = d.sh.CountersLent()
	}
	s := &d.stats
	s.TxPackets.Store(c.TxFrames)
	s.TxBytes.Store(c.TxBytes)
	s.RxPackets.Store(c.RxFrames)
	s.RxInjectedDrops.Store(c.Drops[dpdkengine.DropImpaired])
	s.RxUnknownPeer.Store(c.Drops[dpdkengine.DropUnknownPeer])
	s.TxErrors.Store(c.TxNoMbuf)
	return s
}

// Close stops the shard (the engine stays: dpdkHost closes it).
func (d *dpdkPath) Close() error {
	if d.sh == nil {
		return nil
	}
	if d.held {
		d.last = d.sh.CountersLent()
		d.sh.Release()
		d.held = false
	}
	d.sh.Stop()
	d.sh = nil
	return nil
}
