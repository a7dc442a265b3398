//go:build dpdk

package dpdkengine

import (
	"context"
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/mempool"
)

var _ engine.Backend = (*Backend)(nil)
var _ engine.RegionAllocator = (*Backend)(nil)

// AllocRegion is n bytes of DPDK memory (mempool.NewRegion), which
// zero-copy TX may lend to the driver; free after Close. With zero-copy
// off (dpdk.zero_copy_min 0, the default) it gives nothing: the caller's
// own memory serves as well, and DPDK's stays for the mbuf pool.
func (b *Backend) AllocRegion(n int) ([]byte, func() error, error) {
	b.e.mu.Lock()
	on := b.e.cfg.ZeroCopyMin > 0
	b.e.mu.Unlock()
	if !on {
		return nil, nil, nil
	}
	r, err := mempool.NewRegion(n)
	if err != nil {
		return nil, nil, err
	}
	return r.Bytes(), r.Free, nil
}

// Backend is one transport on an engine as an engine.Backend: Attach
// starts a held shard on queue 0 of the engine's ports (Engine.Run's
// shard, but parked between Runs), Run runs the application on that
// shard's loop (Shard.RunApp). Peers are named by IPv4 address and the
// engine's UDP port.
type Backend struct {
	e    *Engine
	port uint16
	sh   *Shard
}

// linkTimeout bounds Attach's wait for the ports' links.
const linkTimeout = 15 * time.Second

// Backend returns a backend on e for one transport, on the UDP port e is
// configured with now (SetUDPPort before, to change it).
func (e *Engine) Backend() *Backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return &Backend{e: e, port: e.cfg.UDPPort}
}

// Attach waits (bounded) for every port's link and starts the shard that
// drives t. It fails when the engine already runs a shard on queue 0.
func (b *Backend) Attach(t verbs.Transport) error {
	if b.sh != nil {
		return errors.New("dpdk engine: backend already attached")
	}
	if err := b.e.WaitLink(linkTimeout); err != nil {
		return err
	}
	sh, err := b.e.run(t, true)
	if err != nil {
		return err
	}
	b.sh = sh
	return nil
}

// Run runs app on the shard's loop (Shard.RunApp).
func (b *Backend) Run(ctx context.Context, app engine.App) error {
	if b.sh == nil {
		return errors.New("dpdk engine: Run before Attach")
	}
	return b.sh.RunApp(ctx, app)
}

// Kick tells the shard that the application has work from outside the
// data path for its next step (Shard.Kick): an application whose step
// takes requests other threads queue (the verbs library, say) calls it
// after queueing one, so that an idle shard runs the step at once rather
// than at the end of its wait (idle_poll). Safe from any goroutine; does
// nothing before Attach.
func (b *Backend) Kick() {
	if sh := b.sh; sh != nil {
		sh.Kick()
	}
}

// Now is the shard's clock (0 before Attach).
func (b *Backend) Now() verbs.Time {
	if b.sh == nil {
		return 0
	}
	return b.sh.Now()
}

// AddPeer adds a peer by its data-path address: an IPv4 address on a
// port's network (or behind its gateway) and the UDP port, which must be
// this backend's (both ends of a shard pair use one port).
func (b *Backend) AddPeer(addr netip.AddrPort) (verbs.PeerHandle, error) {
	if !addr.Addr().Is4() {
		return 0, fmt.Errorf("dpdk: peer %v: IPv4 only", addr)
	}
	if addr.Port() != b.port {
		return 0, fmt.Errorf("dpdk: peer %v listens on UDP port %d, this end on %d: set the same dpdk.udp_port on both", addr, addr.Port(), b.port)
	}
	return b.e.AddPeer(addr.Addr().As4())
}

// PeerIP is the address of peer h (zero when unknown).
func (b *Backend) PeerIP(h verbs.PeerHandle) [4]byte {
	ip, _ := b.e.PeerIP(h)
	return ip
}

// LocalIP is the address of the engine's first port.
func (b *Backend) LocalIP() [4]byte { return b.e.ports[0].ip }

// LocalAddr is the first port's address and the backend's UDP port.
func (b *Backend) LocalAddr() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4(b.LocalIP()), b.port)
}

// errNoCapture: the engine has no capture hook in its burst path.
var errNoCapture = errors.New("dpdk engine: no packet capture in the data path (capture on a tap or a NIC mirror instead)")

// SetCapture fails (nil is accepted: there is nothing to remove): the
// burst path has no per-packet hook, by design of its cost.
func (b *Backend) SetCapture(c engine.Capture) error {
	if c == nil {
		return nil
	}
	return errNoCapture
}

// Stats is the shard's counters (Shard.Stats); zero before Attach.
func (b *Backend) Stats() engine.Stats {
	if b.sh == nil {
		return engine.Stats{}
	}
	return b.sh.Stats()
}

// Close stops the shard (the engine and its ports stay: Engine.Close
// closes them), so a later Attach may run another transport.
func (b *Backend) Close() error {
	if b.sh == nil {
		return nil
	}
	b.sh.Stop()
	b.sh = nil
	return nil
}
