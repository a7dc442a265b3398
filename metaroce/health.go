package metaroce

import (
	"slices"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Path health tells congestion from failure.
//
//   - Congestion: the path's packets get through, late or CE-marked. The
//     window shrinks (cc.go); a tail-loss timeout on a path that saw marks
//     lately collapses its window and probes it, and only PathFailAfter
//     such timeouts in a row judge it failed.
//   - Failure: ACKs for the path stall while its siblings' ACKs keep
//     coming, with no marks to explain it (a dead link, a dead plane), or
//     the path loses far more than its siblings (PathLossFail, a
//     corrupting link). The path is judged failed at once: its outstanding
//     packets move to healthy paths, it takes no new ones, and it is probed
//     again after a back-off (PathReprobe, doubling while it keeps failing
//     soon after each return). The first probe that is acknowledged brings
//     it back with a fresh window.
//   - Persistent congestion on one path while its siblings are fine is an
//     unlucky ECMP route: the path re-rolls its entropy (a new UDP source
//     port) after draining, and restarts its sequence space under a new
//     generation, which the receiver reads as a restart, not as loss.

// healthyPaths counts paths not judged failed.
func (c *Conn) healthyPaths() int {
	n := 0
	for i := range c.tx {
		if !c.tx[i].failed {
			n++
		}
	}
	return n
}

// pathSRTT is p's smoothed RTT, or the connection's before p has one.
func (c *Conn) pathSRTT(p *txPath) time.Duration {
	if p.hasRTT {
		return p.srtt
	}
	return c.rtt.srtt
}

// congested reports signs of congestion on p: marks lately, or an RTT
// well above the connection's smallest.
//
// A path whose packets were all dropped by a full buffer has no marks of
// its own to show; the connection's RTT, inflated by the same queue its
// siblings crossed, still tells congestion from a dead link.
func (c *Conn) congested(now verbs.Time, p *txPath) bool {
	srtt := c.pathSRTT(p)
	if p.cc.congested(now, srtt) {
		return true
	}
	if min := c.limit.minRTT; min > 0 {
		return (p.hasRTT && p.srtt > 3*min) || (c.rtt.hasRTT && c.rtt.srtt > 2*min)
	}
	return false
}

// siblingsProgressed reports whether another healthy path of c retired
// packets after since: the peer is alive and acknowledging.
func (c *Conn) siblingsProgressed(p *txPath, since verbs.Time) bool {
	for i := range c.tx {
		q := &c.tx[i]
		if q != p && !q.failed && q.lastAck > since {
			return true
		}
	}
	return false
}

// othersBusy reports whether another healthy path of c has packets
// outstanding.
func (c *Conn) othersBusy(p *txPath) bool {
	for i := range c.tx {
		if q := &c.tx[i]; q != p && !q.failed && q.inUse > 0 {
			return true
		}
	}
	return false
}

// peerAnswered reports whether the peer has shown itself alive since a
// silence began at from: it answered a question asked since then. A
// packet that merely arrived after from does not prove it: what the peer
// sent just before it paused (its last data packets, queued behind
// others) comes after the silent path's last ACK all the same, and then
// nothing does (TestPeerPauseAfterLastWordIsNotFailure; TestTwoPlanes on
// a loaded host: one plane's 8 paths failed in a 2.2 ms pause of the peer,
// whose last packet came 26µs after they went silent). So, when something
// did arrive, it asks: a KEEPALIVE, which the peer answers with an ACK,
// over a path not judged failed; again after max(wait, MinRTO) while
// unanswered (a question or its answer lost). A live peer answers within
// an RTT, and the path's next timeout judges it; a paused one answers
// when it resumes, together with the ACKs it owes. Nothing at all since
// from is no answer, and no question: the peer-dead and keepalive timers
// deal with that silence. A half-open connection asks nothing of an
// unproven address (amplification.go): anything heard counts, as before.
func (c *Conn) peerAnswered(now, from verbs.Time, wait time.Duration) bool {
	switch {
	case c.lastRx <= from:
		return false
	case c.halfOpen.in:
		return true
	case c.askedAt > from && c.lastRx > c.askedAt:
		return true
	}
	if c.askedAt <= from || now.Sub(c.askedAt) >= max(wait, c.ep.cfg.MinRTO) {
		c.askedAt = now
		c.queueCtrl(ctrlPkt{op: OpKeepalive})
	}
	return false
}

// suddenLoss: a path whose loss average is below this was delivering
// cleanly, so total silence on it is news (a failure, or the one tail
// loss of a clean path) and its packets move at the first timeout. On a
// path that has been losing packets all along, a timeout is most likely
// one more random tail loss: a probe finds exactly what is missing, and
// moving every outstanding packet would resend ones that arrived.
const suddenLoss = 0.02

// starved reports whether the connection has nothing new to send: every
// posted message is on the wire, so the application waits on the packets
// still outstanding.
func (c *Conn) starved() bool {
	return c.active.Len() == 0 && c.jobs.Len() == 0 && c.moved.Len() == 0
}

// capBlocked reports whether new data waits only because the in-flight
// cap is reached.
func (c *Conn) capBlocked(now verbs.Time) bool {
	return (c.active.Len() > 0 || c.jobs.Len() > 0) && c.limit.blockedUntil(&c.ep.cfg, now, c.resend.Len()) == verbs.Never
}

// slow reports whether p's RTT is well above its siblings' (a degraded
// link or a deep queue on its route alone): three times their median, and
// by more than MinRTO (less than that, the path's own timer is quick
// enough). It runs only at a timeout.
func (c *Conn) slow(p *txPath) bool {
	if !p.hasRTT {
		return false
	}
	// Against the median of the other paths' RTTs: one slow route
	// among many, not a queue every path shares (which slows all alike).
	var buf [MaxPaths]time.Duration
	rtts := buf[:0]
	for i := range c.tx {
		if q := &c.tx[i]; q != p && q.hasRTT && !q.failed {
			rtts = append(rtts, q.srtt)
		}
	}
	if len(rtts) == 0 {
		return false
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	return p.srtt > 3*med && p.srtt-med > c.ep.cfg.MinRTO
}

// pathRTO is the tail-loss timeout of p. While the connection is starved,
// a slow path (a degraded link, a deep queue) must not hold the
// application for its own long RTO: it gets the connection-wide one, and
// its packets are then sent again on the other paths (onPathTimeout).
func (c *Conn) pathRTO(p *txPath) time.Duration {
	cfg := &c.ep.cfg
	d := p.rto(cfg, &c.rtt)
	if c.starved() && c.rtt.hasRTT {
		h := max(cfg.MinRTO, c.rtt.srtt+4*c.rtt.rttvar+cfg.AckDelay)
		if h < d {
			d = h
		}
	}
	return d
}

// peakMemory is how long a path's peak RTT holds without a sample that
// raises it before it is halved: long against the bursts of scheduling
// delay that raise it (milliseconds apart), short against a run, so a
// connection whose host or fabric got quieter detects failures quickly
// again.
const peakMemory = 4 * time.Second

// checkSpurious runs for an ACK of p that retired packets and echoes
// stamp echo. The RTT it shows feeds p's peak (raisePeak). And if p timed
// out since its last progress and echo names a transmission made before
// that timeout, the timeout was spurious (see txPath.toStamp): counted,
// the measure of what patience saves.
func (c *Conn) checkSpurious(now verbs.Time, p *txPath, echo verbs.Time) {
	if echo == 0 || echo > now {
		p.toStamp = 0
		return
	}
	p.raisePeak(now, now.Sub(echo))
	if p.toStamp == 0 {
		return
	}
	if echo <= p.toStamp {
		p.c.SpuriousTimeouts++
		c.c.SpuriousTimeouts++
	}
	// Either way the question is settled: something sent after the
	// timeout got through first (the timeout may have been right), or
	// a packet from before it did.
	p.toStamp = 0
}

// raisePeak folds an RTT sample into p's peak (the stamp echo makes a
// resent packet's sample its own, so a late ACK is a sample, not an
// ambiguity).
func (p *txPath) raisePeak(now verbs.Time, rtt time.Duration) {
	p.decayPeak(now)
	if rtt > p.peak {
		p.peak, p.peakAt = rtt, now
	}
}

// decayPeak halves p's peak for each peakMemory since it last changed.
func (p *txPath) decayPeak(now verbs.Time) {
	for p.peak > 0 && now.Sub(p.peakAt) >= peakMemory {
		p.peak /= 2
		p.peakAt = p.peakAt.Add(peakMemory)
	}
}

// patience is how long a path of c may stay silent before its packets
// are moved (and twice that before it is judged failed by timeouts):
// twice the median of the healthy paths' peak RTTs, within MaxRTO and an
// eighth of PeerDeadTimeout (a path found failed after twice that leaves
// the connection time to recover before the peer is judged dead). RTT
// samples have a tail the smoothed estimate does not cover (a descheduled
// peer or forwarding CPU, a host's timer slack, issue 13), and a move
// inside that tail resends what was only late. The median, so that what
// delays the whole connection (a stalled host) is waited out, while one
// sick path (its ACKs lost on a broken route, arriving only now and then
// and very late) cannot make every path wait for its delays.
//
// Patience does not delay the timer: a timeout still probes at once (a
// NOP whose ACK exposes a tail loss through the echo), so real losses are
// repaired as fast as before. It runs only at a timeout.
func (c *Conn) patience(now verbs.Time) time.Duration {
	var buf [MaxPaths]time.Duration
	peaks := buf[:0]
	for i := range c.tx {
		if q := &c.tx[i]; !q.failed && q.hasRTT {
			q.decayPeak(now)
			peaks = append(peaks, q.peak)
		}
	}
	if len(peaks) == 0 {
		return 0
	}
	slices.Sort(peaks)
	return min(2*peaks[len(peaks)/2], c.ep.cfg.MaxRTO, c.ep.cfg.PeerDeadTimeout/8)
}

// onPathTimeout handles a path whose packets went unacknowledged for an
// RTO. A path whose ACKs stalled while its siblings' did not, with no sign
// of congestion, has failed: its packets move elsewhere at once. Otherwise
// probe (a sequenced NOP whose ACK exposes the exact gaps) and, after
// PathFailAfter timeouts in a row, judge it failed all the same.
func (c *Conn) onPathTimeout(now verbs.Time, p *txPath) {
	cfg := &c.ep.cfg
	stalledSince := p.lastProgress
	p.lastProgress = now
	c.pathChanged(p)
	for psn := p.una; psn.Less(p.next); psn++ {
		if p.slot(psn).pending {
			// A resend or probe of this path is still waiting for its
			// turn under pacing: our own queue holds it, not the network.
			return
		}
	}
	p.timeouts++
	if p.timeouts == 1 {
		// The first timeout since progress: the one a late ACK can
		// prove spurious (a later one only doubles the wait), and the
		// start of the silence that moving and failing wait out.
		p.toStamp = p.lastStamp
		p.silentFrom = stalledSince
	}
	// A silence shorter than the connection's patience is within the
	// delays its paths have lately shown: the probe below asks for an
	// ACK (it finds a tail loss quickly), but nothing moves and nothing
	// fails until the silence outlasts it.
	silence, wait := now.Sub(p.silentFrom), c.patience(now)
	long := silence >= wait
	congested := c.congested(now, p)
	suspect := false
	if c.healthyPaths() > 1 {
		progressed := c.siblingsProgressed(p, stalledSince)
		stalled := !congested && progressed
		// A path is not failed by timeouts while the whole connection
		// is silent: when other paths have packets outstanding, none
		// has been acknowledged since this one stalled and nothing at
		// all came from the peer since it went silent, the silence is
		// the peer's or this host's (a descheduled process, a stalled
		// forwarding CPU), every path would be failed at once for it,
		// and each would move what the peer is about to acknowledge
		// (issue 13). The peer-dead timer ends a connection whose peer
		// is gone. With nothing outstanding elsewhere (the connection's
		// last packets), silence says nothing of the others; and a peer
		// heard from (a keepalive) is alive while this path's packets
		// vanish, even if every path with packets outstanding is on the
		// same broken route: fail as before.
		// Heard from, that is, in answer to a question (peerAnswered):
		// what a peer sent just before it paused arrives after this
		// path's last ACK too.
		connSilent := !progressed && c.othersBusy(p) && !c.peerAnswered(now, p.silentFrom, wait)
		if p.timeouts >= cfg.PathFailAfter && !connSilent && silence >= 2*wait {
			c.failPath(now, p)
			return
		}
		if long && ((stalled && p.cc.loss < suddenLoss) || (c.starved() && c.slow(p)) || c.capBlocked(now)) {
			// ACKs stalled on this path alone, with no sign of
			// congestion: what it holds is lost (a tail loss) or the path
			// is dead. Either way those packets go out on healthy paths
			// now, and the path keeps only a window of one packet; the
			// probe below tells which, and PathFailAfter timeouts in a
			// row judge it failed. A connection with nothing else to
			// send does the same for a path much slower than the others:
			// the copies cost little while the other paths idle, and the
			// application is waiting on exactly these packets. So does one
			// whose in-flight cap holds new data behind this path's
			// packets (a new connection's first packet, lost): nothing
			// else can move it.
			c.moveOutstanding(p, true)
			c.uncount(p)
			suspect = true
		}
	}
	if suspect || congested {
		// A suspect path sends one packet at most until its probe is
		// answered; nothing got through a congested one for an RTO, so as
		// little as possible goes into that queue until it drains. (A
		// timeout without either is a loss, not a reason to slow down.)
		p.cc.onTimeout(cfg)
	}
	span := int(p.una.Distance(p.next))
	if span < SackBits && span < p.ringLen()-1 {
		c.sendNop(now, p, false)
		return
	}
	// No room for a probe: resend the oldest packet, asking for an ACK.
	s := p.slot(p.una)
	if s.kind != slotFree && !s.pending {
		s.pending = true
		p.c.RetransmitTimeout++
		c.resend.Push(resendRef{path: p.id, gen: p.gen, psn: p.una})
	}
}

// onLoss accounts a packet of p found lost, and judges p failed when it
// loses far more than its siblings. Marks do not excuse it: switches
// mark long before they drop, so a path dropping half its packets while
// its siblings do not is broken or hopelessly overloaded either way.
//
// Uniform loss (a lossy fabric, every path alike) is not a path's fault
// and failing paths would not help: only a path losing more than
// PathLossFail and over three times its healthy siblings' average is
// failed.
func (c *Conn) onLoss(now verbs.Time, p *txPath) {
	p.cc.lost()
	if p.cc.loss <= c.ep.cfg.PathLossFail || p.failed {
		return
	}
	if mean, ok := c.siblingsMean(p, pathLoss); ok && p.cc.loss > 3*mean {
		c.failPath(now, p)
	}
}

// siblingsMean is the mean of f over p's healthy siblings (false if it
// has none).
func (c *Conn) siblingsMean(p *txPath, f func(*pathCC) float64) (float64, bool) {
	var sum float64
	n := 0
	for i := range c.tx {
		if q := &c.tx[i]; q != p && !q.failed {
			sum += f(&q.cc)
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func pathLoss(cc *pathCC) float64  { return cc.loss }
func pathAlpha(cc *pathCC) float64 { return cc.alpha }

// failPath judges p failed: its outstanding packets move to healthy paths
// at once, its sequence space restarts under a new generation, and it is
// probed again after a back-off.
func (c *Conn) failPath(now verbs.Time, p *txPath) {
	cfg := &c.ep.cfg
	c.pathChanged(p)
	c.moveOutstanding(p, false)
	switch {
	case p.restoredAt != 0 && now.Sub(p.restoredAt) < 8*p.reprobeWait:
		// Failing again soon after coming back: a flapping or lossy path.
		p.c.Failures++
		c.c.PathFailures++
		p.reprobeWait = min(2*p.reprobeWait, 4*cfg.MaxRTO)
	default:
		p.c.Failures++
		c.c.PathFailures++
		p.reprobeWait = cfg.PathReprobe
	}
	c.uncount(p)
	p.restart()
	if p.rerolling {
		c.takeNewEntropy(p)
	}
	p.failed = true
	p.reprobeAt = now.Add(p.reprobeWait)
}

// reprobe sends a failed path its next probe. Probes that went unanswered
// stay outstanding, in the same generation: an ACK that comes late, from
// behind a deep queue, still brings the path back. Only when the path's
// sequence space is full of them does it restart.
func (c *Conn) reprobe(now verbs.Time, p *txPath) {
	cfg := &c.ep.cfg
	c.pathChanged(p)
	if span := int(p.una.Distance(p.next)); span >= SackBits-1 || span >= p.ringLen()-2 {
		p.restart() // a failed path's probes are not counted in flight
	}
	c.sendNop(now, p, true)
	p.reprobeAt = now.Add(p.reprobeWait)
	p.reprobeWait = min(2*p.reprobeWait, 4*cfg.MaxRTO)
}

// moveOutstanding queues a copy of every data packet p holds for sending
// on other paths. Each slot stays in p's sequence space as a NOP, so the
// path's PSNs still fill in order; the moved copy takes over the slot's
// reference to its message or READ response. With keep (the path carries
// on in the same generation), a data slot keeps a reference too, as a
// moved original: should its ACK come before the copy is sent, the copy
// is cancelled (buildMoved).
func (c *Conn) moveOutstanding(p *txPath, keep bool) {
	for psn := p.una; psn.Less(p.next); psn++ {
		s := p.slot(psn)
		switch s.kind {
		case slotData:
			m := s.msg
			if s.nop || s.attempt != m.attempt || m.status != verbs.StatusSuccess || m.finished {
				m.outstanding--
				c.checkFailed(m)
				c.releaseMsg(m)
			} else {
				c.moved.Push(movedPkt{kind: slotData, msg: m, attempt: s.attempt, offset: s.offset, length: s.length})
				p.c.MovedAway++
				if keep && s.sent && m.op != OpReadReq {
					if !m.moved {
						m.moved = true
						m.acked.reset(m.nChunks)
					}
					m.outstanding++ // the copy's reference; the slot keeps its own
					s.nop, s.moved = true, true
					continue
				}
			}
		case slotReadResp:
			c.moved.Push(movedPkt{kind: slotReadResp, job: s.job, offset: s.offset, length: s.length})
			p.c.MovedAway++
		default:
			continue
		}
		*s = txSlot{kind: slotNop, sent: s.sent, pending: s.pending, sentAt: s.sentAt}
	}
}

// uncount takes p's packets out of the connection's in-flight count
// (txPath.uncounted).
func (c *Conn) uncount(p *txPath) {
	if !p.uncounted {
		c.limit.inflight -= p.inUse
		p.uncounted = true
	}
}

// count puts p's packets back into the in-flight count.
func (c *Conn) count(p *txPath) {
	if p.uncounted {
		c.limit.inflight += p.inUse
		p.uncounted = false
	}
}

// restore brings a failed path back after its probe was acknowledged.
func (c *Conn) restore(now verbs.Time, p *txPath) {
	p.failed = false
	c.pathChanged(p)
	c.count(p) // its probes count in flight again
	p.restoredAt = now
	p.cc.reset(&c.ep.cfg)
	p.speed = speedOne
	p.c.Restores++
}

// sendNop puts a sequenced NOP on p: a tail probe (reprobe=false) or the
// probe of a failed path (reprobe=true). The NOP occupies a PSN, so its ACK
// reveals every gap below it.
func (c *Conn) sendNop(now verbs.Time, p *txPath, reprobe bool) {
	psn := p.next
	s := p.slot(psn)
	*s = txSlot{kind: slotNop}
	p.next++
	p.inUse++
	c.pathChanged(p)
	if !p.uncounted {
		c.limit.inflight++
	}
	p.c.Probes++
	if reprobe {
		p.lastProgress = now
	}
	// Built and sent through the resend queue like any sequenced packet.
	s.pending = true
	c.resend.Push(resendRef{path: p.id, gen: p.gen, psn: psn})
}

// checkReroll runs at the end of each of p's rounds: a path whose marked
// fraction stays high while its siblings' stays low is on a congested ECMP
// route, and starts draining towards a new entropy.
func (c *Conn) checkReroll(p *txPath) {
	cfg := &c.ep.cfg
	if cfg.RerollRounds <= 0 || p.rerolling || len(c.tx) < 2 {
		return
	}
	mean, ok := c.siblingsMean(p, pathAlpha)
	if !ok || p.cc.alpha <= rerollAlpha || p.cc.alpha <= 4*mean {
		p.cc.hotRounds = 0
		return
	}
	p.cc.hotRounds++
	if p.cc.hotRounds >= cfg.RerollRounds {
		p.rerolling = true
	}
}

// finishReroll completes a re-roll once p has nothing outstanding.
func (c *Conn) finishReroll(p *txPath) {
	if !p.rerolling || p.inUse > 0 {
		return
	}
	c.pathChanged(p)
	if !p.failed {
		c.count(p) // nothing in use: only clears the flag
	}
	p.restart()
	c.takeNewEntropy(p)
	p.cc.reset(&c.ep.cfg)
	p.rttEstimator = rttEstimator{}
	p.speed = speedOne
}

// takeNewEntropy gives p a source port no path of this connection used
// before (as far as the port range allows): the ports after every
// connection's initial run, handed out in turn.
func (c *Conn) takeNewEntropy(p *txPath) {
	cfg := &c.ep.cfg
	c.rerolls++
	span := 65536 - int(cfg.EntropyBase)
	x := uint64(c.ordinal)<<20 ^ uint64(c.rerolls)<<8 ^ uint64(p.id)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	p.entropy = cfg.EntropyBase + verbs.Entropy(x%uint64(span))
	p.rerolling = false
	p.c.Rerolls++
	c.c.PathRerolls++
}
