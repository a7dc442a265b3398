package mempair

import (
	"context"
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"net/netip"
	"sync/atomic"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/metaroce"
)

var _ engine.Backend = (*End)(nil)

// End is one side of a Pair as an engine.Backend, so that code written
// against engine.Backend (the CLI's perf loops, a test) runs over the
// deterministic in-memory link. The pair has one virtual clock and one
// loop: End(i).Run runs the whole pair (both transports) and steps the
// given app for side i; Pair.Run steps an app on each side. Everything
// stays on the caller's goroutine, as the Pair's contract has it.
//
// Addresses are made up: side i is 10.0.0.(i+1), on metaroce's UDP port
// (Addr); AddPeer knows only the other side.
type End struct {
	p *Pair
	i int

	capture engine.Capture
	// Counters are atomic so that Stats keeps engine.Backend's "from any
	// goroutine" even though the pair itself has one owner.
	txPackets, txBytes atomic.Uint64
	rxPackets, rxBytes atomic.Uint64
}

// End returns side i (0: A, 1: B) as an engine.Backend.
func (p *Pair) End(i int) *End { return &p.ends[i] }

// Addr is side i's made-up data-path address.
func Addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), metaroce.DefaultUDPPort)
}

// Attach makes t side i's transport (in place of the one the pair was
// built with).
func (e *End) Attach(t verbs.Transport) error {
	if t == nil {
		return errors.New("mempair: Attach(nil)")
	}
	e.p.T[e.i] = t
	if n := t.MaxPacketLen(); n > len(e.p.buf) {
		e.p.buf = make([]byte, n)
	}
	return nil
}

// Run runs the pair with app on this side and none on the other (see
// Pair.Run).
func (e *End) Run(ctx context.Context, app engine.App) error {
	var apps [2]engine.App
	apps[e.i] = app
	return e.p.Run(ctx, apps[0], apps[1])
}

// Run is the pair's loop: each iteration steps the apps not yet done (a
// nil one is none) at the virtual time, then Step (send what is ready,
// advance the clock to the next event and process it). It returns nil
// once every app is done, an app's error, ctx.Err() when cancelled, or
// ErrStalled when nothing is left to happen while an app is not done:
// with a virtual clock, idle waiting is jumping to the next event, and
// there is none.
func (p *Pair) Run(ctx context.Context, a, b engine.App) error {
	apps := [2]engine.App{a, b}
	done := ctx.Done()
	for {
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		left := 0
		for i, app := range apps {
			if app == nil {
				continue
			}
			fin, err := app.Step(p.Now)
			if err != nil {
				return err
			}
			if fin {
				apps[i] = nil
				continue
			}
			left++
		}
		if left == 0 {
			return nil
		}
		if !p.Step() {
			return fmt.Errorf("%w at t=%dns", ErrStalled, p.Now)
		}
	}
}

// Now is the pair's virtual clock.
func (e *End) Now() verbs.Time { return e.p.Now }

// AddPeer returns the other side's handle (its index) for its Addr.
func (e *End) AddPeer(addr netip.AddrPort) (verbs.PeerHandle, error) {
	o := 1 - e.i
	if addr != Addr(o) {
		return 0, fmt.Errorf("mempair: peer %v: the only peer is %v", addr, Addr(o))
	}
	return verbs.PeerHandle(o), nil
}

// PeerIP is side h's address (zero for a handle that is no side).
func (e *End) PeerIP(h verbs.PeerHandle) [4]byte {
	if h > 1 {
		return [4]byte{}
	}
	return Addr(int(h)).Addr().As4()
}

// LocalIP is this side's address.
func (e *End) LocalIP() [4]byte { return Addr(e.i).Addr().As4() }

// LocalAddr is this side's Addr.
func (e *End) LocalAddr() netip.AddrPort { return Addr(e.i) }

// SetCapture installs (nil: removes) the hook that sees what this side
// sends (before the link) and receives (after it), with the made-up
// addresses, the path's entropy as the source port and the virtual
// clock as the timestamp. It never fails.
func (e *End) SetCapture(c engine.Capture) error { e.capture = c; return nil }

// Stats counts what this side sent into the link and received from it
// (bytes are the transport's packets). The link's own counters, drops
// included, are Pair.Link.Stats().
func (e *End) Stats() engine.Stats {
	return engine.Stats{TxPackets: e.txPackets.Load(), TxBytes: e.txBytes.Load(),
		RxPackets: e.rxPackets.Load(), RxBytes: e.rxBytes.Load()}
}

// Close does nothing: the pair holds no resource.
func (e *End) Close() error { return nil }

func (e *End) sent(now verbs.Time, pkt []byte, m verbs.TxMeta) {
	e.txPackets.Add(1)
	e.txBytes.Add(uint64(len(pkt)))
	if e.capture != nil {
		var ecn uint8
		if m.ECT {
			ecn = 2
		}
		e.capture(int64(now), engine.Packet{Sent: true, SrcIP: e.LocalIP(), DstIP: e.PeerIP(1 - verbs.PeerHandle(e.i)),
			SrcPort: uint16(m.Entropy), DstPort: metaroce.DefaultUDPPort, ECN: ecn, Payload: pkt})
	}
}

func (e *End) received(now verbs.Time, pkt []byte, k memlink.PathKey) {
	e.rxPackets.Add(1)
	e.rxBytes.Add(uint64(len(pkt)))
	if e.capture != nil {
		e.capture(int64(now), engine.Packet{SrcIP: e.PeerIP(1 - verbs.PeerHandle(e.i)), DstIP: e.LocalIP(),
			SrcPort: k.Entropy, DstPort: metaroce.DefaultUDPPort, Payload: pkt})
	}
}
