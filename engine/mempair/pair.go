// Package mempair runs two protocol endpoints against each other over the
// deterministic in-memory link (engine/memlink) with a virtual clock. Tests,
// benchmarks and `metaroce demo` use it; nothing in it reads the real clock
// or starts a goroutine, so a run is a pure function of its configuration.
package mempair

import (
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/metaroce"
)

// Pair is endpoint A (index 0, the client) and endpoint B (index 1, which
// accepts connections) joined by one memlink.Link. Each endpoint's peer
// handle for the other is the other's index.
type Pair struct {
	// T are the two transports the pair drives (any verbs.Transport).
	T [2]verbs.Transport
	// EP are the same two endpoints when they are metaroce's (New); nil
	// for pairs of other transports (NewTransports).
	EP   [2]*metaroce.Endpoint
	Link *memlink.Link
	Now  verbs.Time

	// Tap, when set, sees every packet an endpoint sends, before the link.
	Tap func(from int, pkt []byte, meta verbs.TxMeta)

	// RxTap, when set, sees every packet the link delivers, before the
	// receiving endpoint does.
	RxTap func(to int, pkt []byte)

	buf   []byte
	steps uint64
	ends  [2]End
}

// New builds a pair. B is made to accept incoming connections; Node and
// Incarnation default to 1/1 for A and 2/2 for B when zero.
func New(a, b metaroce.Config, link memlink.Config) (*Pair, error) {
	if a.Node == 0 {
		a.Node, a.Incarnation = 1, 1
	}
	if b.Node == 0 {
		b.Node, b.Incarnation = 2, 2
	}
	b.AcceptIncoming = true
	ea, err := metaroce.NewEndpoint(a)
	if err != nil {
		return nil, fmt.Errorf("endpoint A: %w", err)
	}
	eb, err := metaroce.NewEndpoint(b)
	if err != nil {
		return nil, fmt.Errorf("endpoint B: %w", err)
	}
	p := NewTransports(ea, eb, link)
	p.EP = [2]*metaroce.Endpoint{ea, eb}
	return p, nil
}

// NewTransports joins any two transports (the RoCEv2 baseline, say).
func NewTransports(a, b verbs.Transport, link memlink.Config) *Pair {
	n := max(a.MaxPacketLen(), b.MaxPacketLen())
	p := &Pair{T: [2]verbs.Transport{a, b}, Link: memlink.New(link), buf: make([]byte, n)}
	for i := range p.ends {
		p.ends[i].p, p.ends[i].i = p, i
	}
	return p
}

// Steps is the number of events processed so far.
func (p *Pair) Steps() uint64 { return p.steps }

// Flush lets both endpoints send everything they have ready now.
func (p *Pair) Flush() {
	for i, e := range p.T {
		for {
			meta, ok := e.NextPacket(p.Now, p.buf)
			if !ok {
				break
			}
			pkt := p.buf[:meta.Len]
			if p.Tap != nil {
				p.Tap(i, pkt, meta)
			}
			p.ends[i].sent(p.Now, pkt, meta)
			p.Link.Send(int64(p.Now), memlink.Side(i), pkt, memlink.PathKey{Entropy: uint16(meta.Entropy), Plane: uint8(meta.Plane)})
		}
	}
}

// Step sends what is ready, advances the clock to the next event (a
// delivery or a timer) and processes it. It returns false when nothing is
// left to happen.
func (p *Pair) Step() bool {
	p.Flush()
	next := verbs.Never
	if at, ok := p.Link.NextDelivery(); ok {
		next = verbs.Time(at)
	}
	for _, e := range p.T {
		next = min(next, e.NextDeadline())
	}
	if next == verbs.Never {
		return false
	}
	p.steps++
	p.Now = max(p.Now, next)
	p.Link.Deliver(int64(p.Now), p.deliver)
	for _, e := range p.T {
		if e.NextDeadline() <= p.Now {
			e.OnTimer(p.Now)
		}
	}
	return true
}

func (p *Pair) deliver(to memlink.Side, pkt []byte, k memlink.PathKey) {
	if p.RxTap != nil {
		p.RxTap(int(to), pkt)
	}
	p.ends[to].received(p.Now, pkt, k)
	p.T[to].Receive(p.Now, pkt, verbs.RxMeta{Peer: verbs.PeerHandle(to.Other()), Plane: verbs.PlaneID(k.Plane)})
}

// ErrStalled means nothing was left to happen before the condition held.
var ErrStalled = errors.New("mempair: nothing left to happen")

// RunUntil steps until cond holds, failing when the virtual clock passes
// limit or nothing is left to happen.
func (p *Pair) RunUntil(cond func() bool, limit verbs.Time) error {
	for !cond() {
		if !p.Step() {
			return fmt.Errorf("%w at t=%dns", ErrStalled, p.Now)
		}
		if p.Now > limit {
			return fmt.Errorf("mempair: condition not reached by t=%dns", limit)
		}
	}
	return nil
}

// Connect opens a connection from A to B and runs until both ends have it.
func (p *Pair) Connect(limit verbs.Time) (ca, cb *metaroce.Conn, err error) {
	ca, err = p.EP[0].Connect(p.Now, 1)
	if err != nil {
		return nil, nil, err
	}
	err = p.RunUntil(func() bool {
		if cb == nil {
			cb, _ = p.EP[1].Accept()
		}
		return cb != nil && ca.Established()
	}, limit)
	return ca, cb, err
}

// Replace puts a new metaroce endpoint in place of endpoint i, as when a
// host restarts: packets in flight now reach the stranger.
func (p *Pair) Replace(i int, e *metaroce.Endpoint) {
	p.EP[i], p.T[i] = e, e
}
