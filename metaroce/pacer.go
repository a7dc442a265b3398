package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// connLimit is the connection-level limit on new packets: pacing at the
// receiver's rate hint and a cap on the bytes in flight. The path windows
// bound what each path may carry; this bounds what the connection sends in
// all, so that a sender goes straight to its fair share at the receiver
// instead of probing for it.
//
//   - Pacing: data packets, resends included, leave at most at the hint
//     rate (bits/s); each moves nextSend forward by its (jittered)
//     transmission time at that rate. Without a hint (the receiver does not
//     know its link rate, or has not answered yet), or with a hint at least
//     our own link rate, there is no pacing.
//   - Before the first ACK: at most InitialInflight packets, and from then
//     on at most two more per packet acknowledged (slow start).
//   - In flight: the packets not yet acknowledged (and not known lost) may
//     not exceed InflightRTTs × hint × (RTT + AckDelay) (at least one
//     packet), RTT being the smoothed RTT but at most 4 × minRTT. A burst
//     sent before the first hint arrived therefore drains from the fabric
//     before new packets join it, which is what empties the receiver's
//     queue in a few RTTs after an incast starts. (The smoothed RTT, not
//     the smallest: a sender sharing its own NIC with many connections,
//     or acknowledged by a receiver that holds its ACKs longer than
//     AckDelay (fairShare.ackHold), waits longer than minRTT for every
//     ACK, and a cap on minRTT would hold it below its hint.)
//
// Resends of lost packets are paced but not capped: they replace packets
// already counted.
type connLimit struct {
	hintBps float64 // the receiver's latest hint, bits/s (0 = none)
	heard   bool    // an ACK has arrived, with or without a hint
	unpaced bool    // the hint is at least our own link rate: no pacing
	// grown is the slow-start bound on the in-flight cap: it starts at
	// InitialInflight and grows by two per acknowledged packet (tripling
	// each RTT). The first senders of an incast hear hints meant for the
	// few senders counted so far; this keeps them from filling the
	// receiver's queue before the later ones are counted.
	grown    int
	nextSend verbs.Time // earliest time for the next new packet
	inflight int        // sequenced packets outstanding on paths not judged failed
	minRTT   time.Duration
	srtt     time.Duration // smoothed RTT (gain 1/8), for the in-flight cap
	pktBytes int           // size of a full data packet, for the in-flight cap
	jitter   uint64        // state of the pacing jitter's generator
}

// maxInflightPackets is the in-flight cap in packets (large when there is
// no hint).
func (l *connLimit) maxInflightPackets(cfg *Config) int {
	if cfg.DisableCC {
		return 1 << 30
	}
	if !l.heard {
		// Before the first ACK nothing is known of the receiver: as
		// TCP's initial window, a few packets, so that N senders
		// starting at once put N·InitialInflight packets, not N full
		// windows, into the receiver's queue.
		return cfg.InitialInflight
	}
	if l.hintBps <= 0 || l.minRTT <= 0 {
		return 1 << 30
	}
	if l.grown < cfg.InitialInflight {
		l.grown = cfg.InitialInflight
	}
	// The peer holds ACKs up to AckDelay (longer holds show in srtt):
	// the ACK clock ticks at most that much slower than the RTT.
	bytes := cfg.InflightRTTs * l.hintBps / 8 * (min(l.srtt, 4*l.minRTT) + cfg.AckDelay).Seconds()
	n := int(bytes / float64(l.pktBytes))
	if n < 1 {
		n = 1
	}
	return min(n, l.grown)
}

// acked grows the slow-start bound as a packet is acknowledged: by two,
// so it triples each RTT (by one, doubling, the 1-packet start costs a
// lone sender several RTTs at full rate).
func (l *connLimit) acked() {
	if l.grown < 1<<20 {
		l.grown += 2
	}
}

// blockedUntil returns when the connection may send its next new packet:
// now or earlier if it may send at once, a later time when pacing holds it,
// Never when the in-flight cap holds it (an ACK lifts that). lost is the
// number of outstanding packets known lost (queued for resend): they are
// not in the network, so they do not count against the cap.
func (l *connLimit) blockedUntil(cfg *Config, now verbs.Time, lost int) verbs.Time {
	if l.inflight-lost >= l.maxInflightPackets(cfg) {
		return verbs.Never
	}
	return l.nextSend
}

// paced reports whether pacing holds every data packet, resends included,
// at now: the hint is the connection's whole rate, and resending a burst
// of losses at line rate into the queue that dropped them would only
// overflow it again.
func (l *connLimit) paced(now verbs.Time) bool { return l.hintBps > 0 && l.nextSend > now }

// sent accounts a new packet of n bytes sent at now.
func (l *connLimit) sent(now verbs.Time, n int) {
	if l.hintBps <= 0 || l.unpaced {
		return
	}
	gap := float64(n) * 8 * 1e9 / l.hintBps
	// A sender slightly behind its schedule (its NIC was busy) keeps
	// that credit, less than one gap, so the jitter below evens out
	// instead of idling a link the hint fills exactly. One further behind
	// was idle, and starts afresh: credit then would be a burst.
	if l.nextSend < now-verbs.Time(gap) {
		l.nextSend = now
	}
	// Each gap is drawn from [0.5, 1.5) of the exact one (mean exact):
	// senders given the same hint at the same moment would otherwise
	// keep the same phase for ever, and their packets would reach the
	// receiver's port together, a burst per period, however low the sum
	// of their rates. The generator is deterministic (seeded per
	// connection), so simulations still repeat exactly.
	l.jitter = l.jitter*6364136223846793005 + 1442695040888963407
	u := float64(l.jitter>>11) / (1 << 53)
	l.nextSend += verbs.Time(gap * (0.75 + u/2))
}

// setHint takes a rate hint from an ACK (Mbit/s on the wire, 0 = none).
// A hint holds only until the next one: a hint at least twice the
// previous one also pulls in a next-send time that the lower one had
// pushed out, to at most the longest jittered gap of a full packet at the
// new rate from now, so that one ACK undoes a low hint at once instead of
// after the long gap it set (a hint of 1 Mbit/s puts 33 ms between 4 KiB
// packets). Smaller rises, the fair share's ordinary moves, leave the
// schedule (and its jitter) alone. Only the peer can send a hint (ACKs
// prove its token, token.go); what a hint may do is no more than the
// peer could do by acknowledging slowly.
func (l *connLimit) setHint(cfg *Config, now verbs.Time, mbps uint32) {
	if cfg.DisableCC {
		return
	}
	prev := l.hintBps
	l.hintBps = float64(mbps) * 1e6
	if l.hintBps >= 2*prev && prev > 0 && l.nextSend > now {
		if cfg.LinkRateBps > 0 && l.hintBps >= cfg.LinkRateBps {
			l.nextSend = now // unpaced from now on
		} else if gap := verbs.Time(1.5 * float64(l.pktBytes) * 8 * 1e9 / l.hintBps); l.nextSend > now+gap {
			l.nextSend = now + gap
		}
	}
	l.heard = true
	// A hint at or above our own link's rate asks for no pacing: the NIC
	// sends no faster than that anyway, and pacing (with its jitter) at
	// the line rate could only leave the link idle between packets.
	l.unpaced = cfg.LinkRateBps > 0 && l.hintBps >= cfg.LinkRateBps
}

// sample records an RTT sample for minRTT and srtt.
func (l *connLimit) sample(r time.Duration) {
	if r <= 0 {
		return
	}
	if l.minRTT == 0 || r < l.minRTT {
		l.minRTT = r
	}
	if l.srtt == 0 {
		l.srtt = r
	} else {
		l.srtt += (r - l.srtt) / 8
	}
}
