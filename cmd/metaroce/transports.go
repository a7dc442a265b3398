package main

import (
	"fmt"
	"strconv"

	"github.com/metaroce/metaroce/internal/transports"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/metrics"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// transportKind is what the CLI needs to know about one transport beyond
// the verbs interfaces: what every front end needs (internal/transports:
// how to build its device from a profile, its UDP ports, its MTU), and
// how to read its counters for the metrics endpoint and perf's summary.
// This map is the only place in the CLI's node and metrics code that
// names a transport; everything else runs a verbs.Device.
type transportKind struct {
	transports.Kind
	// snapshot copies the counters of a node's sessions.
	snapshot func(ss []verbs.Session) []metrics.Conn
	// endpoint copies the counters of the node's device that no
	// connection owns (engine goroutine only).
	endpoint func(d verbs.Device) metrics.Endpoint
	// repair sums the loss-repair counters of a node's sessions for
	// perf's closing summary.
	repair func(ss []verbs.Session) repairStats
}

var transportKinds = map[profile.Transport]transportKind{
	profile.TransportMetaroce: {Kind: transports.Kinds[profile.TransportMetaroce],
		snapshot: metaroceSnapshot, endpoint: metaroceEndpoint, repair: metaroceRepair},
	profile.TransportRoCEv2: {Kind: transports.Kinds[profile.TransportRoCEv2],
		snapshot: rocev2Snapshot, endpoint: rocev2Endpoint, repair: rocev2Repair},
}

// kindOf returns the transport t, or an error naming it.
func kindOf(t profile.Transport) (transportKind, error) {
	k, ok := transportKinds[t]
	if !ok {
		return transportKind{}, fmt.Errorf("transport %q", t)
	}
	return k, nil
}

// endpointCounters is what metaroce's and rocev2's devices share: the
// device embeds its *Endpoint, whose Counters the metrics read.
type endpointCounters[C any] interface{ Counters() *C }

// metaroceEndpoint: the endpoint's crc count includes the CRC failures
// attributed to a connection (metaroce_conn_rx_dropped_total{reason=crc}).
func metaroceEndpoint(d verbs.Device) metrics.Endpoint {
	e, ok := d.(endpointCounters[mr.EndpointCounters])
	if !ok {
		return metrics.Endpoint{}
	}
	c := e.Counters()
	return metrics.Endpoint{RxDropped: []metrics.Count{{Reason: "crc", N: c.CRCDrops},
		{Reason: "malformed", N: c.Malformed}, {Reason: "unknown_conn", N: c.UnknownConn},
		// The sealed modes: a PSK MAC that did not check, a packet sealed
		// otherwise than the endpoint's mode.
		{Reason: "auth", N: c.AuthFailures}, {Reason: "seal_mismatch", N: c.SealMismatch}},
		ConnectsRefused: []metrics.Count{{Reason: "max_conns", N: c.RefusedMaxConns},
			{Reason: "per_peer", N: c.RefusedPerPeer}, {Reason: "backlog", N: c.RefusedBacklog},
			{Reason: "not_accepting", N: c.RefusedNotAccepting}},
		Resets:      []metrics.Count{{Reason: "sent", N: c.ResetsSent}, {Reason: "rate_limited", N: c.ResetsLimited}},
		ConnsFailed: []metrics.Count{{Reason: "half_open_evicted", N: c.HalfOpenEvicted}, {Reason: "peer_restart", N: c.PeerRestarts}},
		RxCoalesced: c.RxCoalesced}
}

// rocev2Endpoint: unknown_conn is a packet for a QP that is not open,
// which NICs drop silently.
func rocev2Endpoint(d verbs.Device) metrics.Endpoint {
	e, ok := d.(endpointCounters[rocev2.EndpointCounters])
	if !ok {
		return metrics.Endpoint{}
	}
	c := e.Counters()
	return metrics.Endpoint{RxDropped: []metrics.Count{{Reason: "crc", N: c.ICRCDrops},
		{Reason: "malformed", N: c.Malformed}, {Reason: "unknown_conn", N: c.UnknownQP}},
		// max_conns: the endpoint holds MaxQPs QPs (REJ No QP); RoCEv2 has
		// no per-peer or backlog bound, no RESET, no eviction.
		ConnectsRefused: []metrics.Count{{Reason: "max_conns", N: c.RefusedMaxQPs},
			{Reason: "not_accepting", N: c.RefusedNotAccepting}}}
}

func metaroceSnapshot(ss []verbs.Session) []metrics.Conn {
	var out []metrics.Conn
	for _, s := range ss {
		m := s.(mr.Session).C
		c := m.Counters()
		mc := metrics.Conn{ID: strconv.Itoa(int(m.LocalID())), TxPackets: c.TxPackets, TxBytes: c.TxBytes,
			RxPackets: c.RxPackets, RxBytes: c.RxBytes, DataPackets: c.DataPacketsSent, DataResent: c.DataResent,
			PayloadPlaced: c.PayloadPlaced, PathFailures: c.PathFailures, RNRRetries: c.RNRRetries,
			Messages: c.MessagesSent, MessagesReceived: c.MessagesReceived, CRCDrops: c.CRCDrops,
			SpuriousTimeouts: c.SpuriousTimeouts, CopiesCancelled: c.CopiesCancelled, LastChunksHeld: c.LastChunksHeld,
			KeyUpdates: c.KeyUpdates, TxCoalesced: c.TxCoalesced,
			RateHintBps: m.RateHintBps(), Inflight: m.Inflight()}
		// The path counters of every path the connection has (not only
		// the first MaxPaths shown per path) add up to its totals.
		var staleGen, genRefused, outOfWindow, probes, moved uint64
		for i := 0; i < m.NumPaths(); i++ {
			pc := m.PathCounters(verbs.PathID(i))
			staleGen += pc.StaleGeneration
			genRefused += pc.GenerationsRefused
			outOfWindow += pc.OutOfWindowReceived
			probes += pc.Probes
			moved += pc.MovedAway
		}
		mc.RxDropped = []metrics.Count{{Reason: "crc", N: c.CRCDrops}, {Reason: "malformed", N: c.Malformed},
			{Reason: "duplicate", N: c.Duplicates}, {Reason: "stale_generation", N: staleGen},
			{Reason: "stale_incarnation", N: c.StalePackets}, {Reason: "out_of_window", N: outOfWindow + c.OutOfWindow},
			// Mode none's proofs (metaroce/token.go): an unsequenced packet
			// without its token's tag; a newer generation not adopted.
			{Reason: "bad_token", N: c.BadTags}, {Reason: "generation_refused", N: genRefused},
			{Reason: "access", N: c.AccessViolations}, {Reason: "length", N: c.LengthErrors},
			// placed_again: copies of a placed chunk on a new PSN (moved,
			// resent), acknowledged but not written again.
			{Reason: "placed_again", N: c.DuplicateChunks},
			// held_full: a WRITE's early last chunk that could not be held
			// (maxHeldChunks), not acknowledged, for the sender to resend.
			{Reason: "held_full", N: c.LastChunksRefused},
			// The sealed modes: a tag that did not check, a packet number
			// seen before (replay) or older than the replay window.
			{Reason: "auth", N: c.AuthFailures}, {Reason: "replay", N: c.Replays}, {Reason: "replay_old", N: c.ReplaysOld}}
		mc.TxExtra = []metrics.Count{{Reason: "probe", N: probes}, {Reason: "moved", N: moved}}
		for i := 0; i < m.NumPaths() && i < metrics.MaxPaths; i++ {
			p := verbs.PathID(i)
			pc := m.PathCounters(p)
			mc.Paths = append(mc.Paths, metrics.Path{TxPackets: pc.TxPackets, TxBytes: pc.TxBytes,
				RxPackets: pc.RxPackets, RetransmitSACK: pc.RetransmitSACK, RetransmitTimeout: pc.RetransmitTimeout,
				CEReceived: pc.CEReceived, Failures: pc.Failures, SRTT: m.PathSRTT(p),
				Failed: m.PathFailed(p), Window: m.PathWindow(p),
				Restores: pc.Restores, Rerolls: pc.Rerolls})
		}
		out = append(out, mc)
	}
	return out
}

func rocev2Snapshot(ss []verbs.Session) []metrics.Conn {
	var out []metrics.Conn
	for _, s := range ss {
		for _, rc := range s.(*rocev2.Session).Conns {
			if len(out) >= metrics.MaxConns {
				return out
			}
			c := rc.Counters()
			out = append(out, metrics.Conn{ID: strconv.Itoa(int(rc.QPN())), TxPackets: c.TxPackets, TxBytes: c.TxBytes,
				RxPackets: c.RxPackets, RxBytes: c.RxBytes, DataPackets: c.DataPacketsSent, DataResent: c.DataResent,
				Timeouts: c.Timeouts, Retries: c.Retries,
				// duplicate: requests already executed (acknowledged again,
				// not placed again); out_of_sequence: requests behind a gap,
				// dropped for go-back-N to resend.
				RxDropped: []metrics.Count{{Reason: "crc", N: c.ICRCDrops}, {Reason: "malformed", N: c.Malformed},
					{Reason: "duplicate", N: c.Duplicates}, {Reason: "out_of_sequence", N: c.OutOfSequence},
					{Reason: "access", N: c.AccessErrors}, {Reason: "invalid_request", N: c.InvalidRequests},
					{Reason: "duplicate_response", N: c.DuplicateResponses}}})
		}
	}
	return out
}

// metaroceRepair: resends by cause are packets (SACK-driven, by the
// tail-loss timer, moved off a failed path); lost is the gaps the peer's
// SACKs showed.
func metaroceRepair(ss []verbs.Session) repairStats {
	var r repairStats
	var sack, timeout, moved uint64
	for _, s := range ss {
		m := s.(mr.Session).C
		c := m.Counters()
		r.Sent += c.DataPacketsSent
		r.Resent += c.DataResent
		r.Lost += c.SackGaps
		r.Duplicates += c.Duplicates + c.DuplicateChunks
		r.PathFailures += c.PathFailures
		for i := 0; i < m.NumPaths(); i++ {
			pc := m.PathCounters(verbs.PathID(i))
			sack += pc.RetransmitSACK
			timeout += pc.RetransmitTimeout
			moved += pc.MovedAway
		}
	}
	r.LostHow = "SACK gaps"
	r.Causes = []repairItem{{"sack", sack}, {"timeout", timeout}, {"moved", moved}}
	return r
}

// rocev2Repair: go-back-N resends whole windows, so its causes are retry
// episodes (an ACK timeout, a sequence NAK), not packets; lost is the
// requests its responder dropped behind a gap.
func rocev2Repair(ss []verbs.Session) repairStats {
	var r repairStats
	var timeouts, naks uint64
	for _, s := range ss {
		for _, rc := range s.(*rocev2.Session).Conns {
			c := rc.Counters()
			r.Sent += c.DataPacketsSent
			r.Resent += c.DataResent
			r.Lost += c.OutOfSequence
			r.Duplicates += c.Duplicates
			timeouts += c.Timeouts
			naks += c.NaksReceived
		}
	}
	r.LostHow = "out of sequence"
	r.Causes = []repairItem{{"timeout episodes", timeouts}, {"NAK episodes", naks}}
	return r
}
