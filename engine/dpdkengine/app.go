//go:build dpdk

package dpdkengine

import (
	"context"
	"errors"
	"github.com/metaroce/metaroce/verbs"
	"time"

	"github.com/metaroce/metaroce/engine"
)

// The application on the shard: RunApp makes the shard's loop call an
// engine.App once per iteration, on the shard's goroutine (its locked OS
// thread), between the receive burst and the transmit, as an l2fwd main
// loop runs its processing between rte_eth_rx_burst and rte_eth_tx_burst.
// Posting work and polling completions therefore never cross goroutines,
// and nothing is handed back and forth per iteration.

// publishEvery is how often a running shard refreshes the counters that
// Stats reads: often enough for a 100 ms metrics sample, rarely enough to
// cost nothing per packet.
const publishEvery = verbs.Time(10 * time.Millisecond)

// errRunning: RunApp while another RunApp of the shard is in progress.
var errRunning = errors.New("dpdk engine: the shard already runs an application")

// RunApp runs app on the shard's loop until app.Step reports done (nil),
// returns an error (that error), ctx is cancelled (ctx.Err(); the app is
// not stepped again once RunApp returns) or the shard stops (ErrStopped).
// One RunApp runs at a time. The app, and so the transport, is touched
// only by the shard's goroutine until RunApp returns.
func (s *Shard) RunApp(ctx context.Context, app engine.App) error {
	if !s.inRun.CompareAndSwap(false, true) {
		return errRunning
	}
	defer s.inRun.Store(false)
	if err := s.Do(func(verbs.Time) { s.app = app }); err != nil {
		return err
	}
	select {
	case err := <-s.appDone:
		return err
	case <-s.done:
		select {
		case err := <-s.appDone:
			return err
		default:
			return ErrStopped
		}
	case <-ctx.Done():
		// Take the app off the loop; it may have ended meanwhile.
		if err := s.Do(func(verbs.Time) { s.app = nil }); err != nil {
			return err
		}
		select {
		case err := <-s.appDone:
			return err
		default:
			return ctx.Err()
		}
	}
}

// endApp ends the running app (shard goroutine): RunApp returns err.
func (s *Shard) endApp(err error) {
	s.app = nil
	s.publish()
	s.appDone <- err // capacity 1, and one RunApp at a time: never blocks
}

// park blocks a held shard until an app is installed (true) or the shard
// stops (false), running Do's commands meanwhile. Nothing in the data path
// runs while parked: the transport belongs to RunApp's caller.
func (s *Shard) park() bool {
	s.flushAll() // what the app's last iterations built
	s.publish()
	for s.app == nil {
		if s.stop.Load() {
			return false
		}
		if s.cmdFlag.Load() {
			s.runCmds(s.now())
			continue
		}
		<-s.wake
	}
	return true
}

// publish copies the counters for Stats (shard goroutine).
func (s *Shard) publish() {
	s.pubMu.Lock()
	s.pub = s.c
	s.pubMu.Unlock()
}

// Stats is the shard's counters in engine terms, as last published (at
// most publishEvery old while the shard runs, exact once an app has ended
// or the shard has parked or stopped). Safe from any goroutine; it never
// waits for the shard.
//
// The first shard of an engine also reports the engine's af_packet ring
// drops as RxKernelDrops (the kernel dropped them for a full receive
// ring, as it drops datagrams for a full socket buffer under udp).
func (s *Shard) Stats() engine.Stats {
	s.pubMu.Lock()
	c := s.pub
	s.pubMu.Unlock()
	st := c.engineStats()
	st.ZeroCopy = s.zcOn
	if s.index == 0 {
		st.RxKernelDrops, _ = s.e.ring.read()
	}
	return st
}

// engineStats maps the counters onto engine.Stats: bytes are whole
// frames; TxErrors are packets dropped for want of a neighbour's MAC;
// every other drop reason but the impairment stage's and the neighbour
// table's is RxOtherDrops.
func (c *Counters) engineStats() engine.Stats {
	imp, unk := c.Drops[DropImpaired], c.Drops[DropUnknownPeer]
	return engine.Stats{TxPackets: c.TxFrames, TxBytes: c.TxBytes, TxErrors: c.NoNeighbour,
		RxPackets: c.RxFrames, RxBytes: c.RxBytes, RxCE: c.RxCE,
		RxInjectedDrops: imp, RxUnknownPeer: unk, RxOtherDrops: c.Dropped() - imp - unk,
		Loop: engine.LoopTime{Measured: true, Rx: c.Time[PhaseRx], Core: c.Time[PhaseCore], Tx: c.Time[PhaseTx],
			App: c.Time[PhaseApp], Idle: c.Time[PhaseIdle]},
		DriverCalls: c.DriverCalls, RxPolls: c.RxPolls, ZeroCopySent: c.ZeroCopySent,
		ZeroCopyFallbackMemory: c.ZeroCopyFallback[ZCNotDPDKMemory], ZeroCopyFallbackSlots: c.ZeroCopyFallback[ZCNoSlot],
		ZeroCopyFallbackNoMbuf: c.ZeroCopyFallback[ZCNoMbuf]}
}
