//go:build dpdk

package dpdkengine

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/dpdk"
)

// TelemetryCommand is the DPDK telemetry command that reports the engine's
// counters (dpdk-telemetry.py, or any client of the v2 socket).
const TelemetryCommand = "/metaroce/stats"

// Stats is a flat snapshot of the engine's counters: every shard, every
// port and every lcore loop, by name (shard0_rx_frames,
// port_net_memif0_ipackets, loop0_not_steered, ...).
func (e *Engine) Stats() (names []string, values []uint64) {
	add := func(n string, v uint64) {
		names = append(names, n)
		values = append(values, v)
	}
	e.mu.Lock()
	shards := append([]*Shard(nil), e.shards...)
	e.mu.Unlock()
	for k, s := range shards {
		c, err := s.Counters()
		if err != nil {
			continue
		}
		p := fmt.Sprintf("shard%d_", k)
		add(p+"rx_frames", c.RxFrames)
		add(p+"rx_delivered", c.RxDelivered)
		add(p+"rx_no_udp_checksum", c.RxNoUDPChecksum)
		add(p+"tx_frames", c.TxFrames)
		add(p+"tx_bytes", c.TxBytes)
		add(p+"dropped", c.Dropped())
		for i, v := range c.Drops {
			if i != int(DropNone) {
				add(p+"drop_"+Drop(i).String(), v)
			}
		}
		add(p+"reordered", c.Reordered)
		add(p+"tx_no_mbuf", c.TxNoMbuf)
		add(p+"tx_blocked", c.TxBlocked)
		add(p+"no_neighbour", c.NoNeighbour)
		add(p+"arp_requests_sent", c.ARPRequestsSent)
		add(p+"arp_replies_sent", c.ARPRepliesSent)
		add(p+"idle_sleeps", c.IdleSleeps)
		add(p+"loops", c.Loops)
		add(p+"driver_calls", c.DriverCalls)
		add(p+"rx_polls", c.RxPolls)
		add(p+"idle_waits", c.IdleWaits)
		add(p+"catch_up_polls", c.CatchUpPolls)
		add(p+"ack_flushes", c.AckFlushes)
		add(p+"coalesced", c.Coalesced)
		add(p+"commands", c.Commands)
		add(p+"zero_copy_sent", c.ZeroCopySent)
		for i, v := range c.ZeroCopyFallback {
			add(p+"zero_copy_fallback_"+ZCReason(i).String(), v)
		}
		add(p+"zero_copy_in_flight", c.ZeroCopyInFlight)
		for ph, d := range c.Time {
			add(p+"time_"+Phase(ph).String()+"_ns", uint64(d))
		}
	}
	for _, p := range e.ports {
		st, err := p.id.Stats()
		if err != nil {
			continue
		}
		n := "port_" + telName(p.name) + "_"
		add(n+"ipackets", st.IPackets)
		add(n+"opackets", st.OPackets)
		add(n+"ibytes", st.IBytes)
		add(n+"obytes", st.OBytes)
		add(n+"imissed", st.IMissed)
		add(n+"ierrors", st.IErrors)
		add(n+"oerrors", st.OErrors)
		add(n+"rx_nombuf", st.RxNoMbuf)
	}
	for i, l := range e.LoopStats() {
		n := fmt.Sprintf("loop%d_", i)
		add(n+"rx_packets", l.RxPackets)
		add(n+"tx_packets", l.TxPackets)
		add(n+"tx_dropped", l.TxDropped)
		add(n+"rx_ring_full", l.RxRingFull)
		add(n+"not_steered", l.NotSteered)
		add(n+"idle_sleeps", l.IdleSleeps)
	}
	return names, values
}

// telName makes s a valid telemetry dictionary key (letters, digits, _
// and /; DPDK refuses the rest): a PCI address 0000:3b:00.0 becomes
// 0000_3b_00_0.
func telName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/') {
			b[i] = '_'
		}
	}
	return string(b)
}

// StartTelemetry registers TelemetryCommand and refreshes what it reports
// every interval until the returned stop is called (or the engine stops).
// Needs an EAL with telemetry on (no --no-telemetry).
func (e *Engine) StartTelemetry(every time.Duration) (stop func(), err error) {
	if err := dpdk.RegisterTelemetry(TelemetryCommand, "metaroce DPDK engine counters: shards, ports, lcore loops"); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	publish := func() { dpdk.PublishTelemetry(e.Stats()) }
	publish()
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				publish()
			}
		}
	}()
	return func() { close(done); <-finished }, nil
}
