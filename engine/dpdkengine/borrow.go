//go:build dpdk

package dpdkengine

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/metaroce"
)

// Lending: an application whose logic is a poll loop (post work, poll
// completions, step the data path) drives a shard in lock-step instead of
// through Do: Borrow parks the shard between two iterations and hands its
// transport to the caller, Release lets it run on. Release followed by
// Borrow lets the shard run exactly one more iteration (the rest of the
// current one: timers, transmit; then one receive burst), so a caller that
// loops "work; Release; Borrow" sees every burst. The handshake uses two
// preallocated channels: it allocates nothing.
//
// While the shard is lent, its goroutine is blocked and the borrower is
// the only goroutine that may touch the transport (and everything
// reachable from it), read CountersLent, or call anything but Release,
// Now and Stop on the shard; Do would wait for the loan to end.

// Borrow parks the shard at its next loop iteration and returns once it
// is parked. It must not be called while the caller already holds the
// loan. It returns ErrStopped when the shard no longer runs.
func (s *Shard) Borrow() error {
	s.borrowReq.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-s.lent:
		return nil
	case <-s.done:
		select {
		case <-s.lent:
			return nil
		default:
			return ErrStopped
		}
	}
}

// Release ends a loan: the shard's loop goes on.
func (s *Shard) Release() { s.ReleaseFor(0) }

// ReleaseFor ends a loan and lets a following Borrow wait until the shard
// has run up to n more busy iterations (iterations that moved packets or
// ran timers); an idle iteration ends the wait at once. A bandwidth test
// keeps the shard sending between two polls of its completion queue this
// way, while a latency test (idle between messages) still gets the loan
// back after one iteration.
func (s *Shard) ReleaseFor(n int) {
	s.runLeft = n // the shard is parked: it reads this after returned
	select {
	case s.returned <- struct{}{}:
	default:
	}
}

// lend runs on the shard's goroutine when a Borrow is pending: it signals
// the borrower and blocks until Release (or a stop).
func (s *Shard) lend() {
	s.borrowReq.Store(false)
	s.lent <- struct{}{}
	for {
		select {
		case <-s.returned:
			return
		case <-s.wake:
			if s.stop.Load() {
				return
			}
		}
	}
}

// lendNow tells the loop whether a pending Borrow is served now: after
// the iterations ReleaseFor allowed, or when this one had no work.
func (s *Shard) lendNow(work int) bool {
	if s.runLeft > 0 && work > 0 {
		s.runLeft--
		return false
	}
	return true
}

// CountersLent returns the shard's counters; only the holder of a loan (or
// code running in Do) may call it.
func (s *Shard) CountersLent() Counters { return s.c }

// Now is the shard's clock (the time its transport runs on). Safe from
// any goroutine.
func (s *Shard) Now() metaroce.Time { return s.now() }

// Stop stops this shard and waits for its loop to end; a loan in progress
// ends with it. A shard started with Run is then detached from the engine,
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
func (e *Engine) AddPeer(ip [4]byte) (metaroce.PeerHandle, error) {
	h, ok := newNeighbours(e.neigh).lookup(IPv4(ip), true)
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
