//go:build dpdk

package dpdkengine

import (
	"errors"
	"fmt"
	"github.com/metaroce/metaroce/verbs"
)

// Now is the shard's clock (the time its transport runs on). Safe from
// any goroutine.
func (s *Shard) Now() verbs.Time { return s.now() }

// Stop stops this shard and waits for its loop to end; a RunApp in
// progress ends with it (ErrStopped). A shard started with Run is then detached from the engine,
// so Run may start another transport on the same ports (the ports and
// their state stay as they are).
func (s *Shard) Stop() {
	s.cmdMu.Lock()
	s.stop.Store(true)
	s.cmdMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.loops) > 0 {
		return // sharded: the loops still steer to every shard index
	}
	for i, x := range e.shards {
		if x == s {
			e.shards = append(e.shards[:i], e.shards[i+1:]...)
			break
		}
	}
}

// AddPeer returns the peer handle of IPv4 address ip, adding it to the
// neighbour table when new (its MAC is then resolved with ARP when a
// packet first goes to it, or learned from its first packet). Safe from
// any goroutine; a packet from ip arriving later maps to the same handle.
func (e *Engine) AddPeer(ip [4]byte) (verbs.PeerHandle, error) {
	h, ok := newNeighbours(e.neigh).lookup(IPv4(ip), learnTold)
	if !ok {
		return 0, errors.New("dpdk engine: neighbour table full")
	}
	return h, nil
}

// SetImpairment replaces the receive impairment stage of the shards
// started from now on (Run, RunSharded); running shards keep theirs.
func (e *Engine) SetImpairment(im Impairment) error {
	if im.Loss < 0 || im.Loss >= 1 || im.Reorder < 0 || im.Reorder >= 1 {
		return fmt.Errorf("dpdk engine: impairment loss %v, reorder %v: each must be in [0, 1)", im.Loss, im.Reorder)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.Impair = im
	return nil
}

// SetUDPPort replaces the UDP port (udp_port) of the shards started from
// now on: the port they listen on and send to. A CLI that runs one
// transport after another on the same ports (metaroce on 4794, the RoCEv2
// baseline on 4791) sets it before each Run.
func (e *Engine) SetUDPPort(p uint16) error {
	if p == 0 {
		return errors.New("dpdk engine: UDP port 0")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.UDPPort = p
	return nil
}

// SetZeroCopyMin sets dpdk.zero_copy_min for shards started from now on
// (Run, Backend.Attach); running shards keep theirs. Zero-copy needs the
// ports to take chained mbufs, which is set up when the engine starts:
// an engine started with zero_copy_min 0 never sends by reference.
func (e *Engine) SetZeroCopyMin(n int) error {
	if n < 0 || n > 65535 {
		return fmt.Errorf("dpdk engine: zero_copy_min %d outside 0..65535", n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cfg.ZeroCopyMin = n
	return nil
}
