package metaroce

import (
	"slices"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// fairShare is the receiver's side of congestion control: it knows its
// link rate (Config.LinkRateBps), counts the connections sending to it,
// and gives each a max-min fair share of the link that it returns in every
// ACK (AckBlock.RateHint), so a sender goes straight to its rate instead of
// probing for it.
//
// Rates are measured over intervals of at least HintInterval, stretched so
// that a sender at the fair share sends at least four packets in one (a
// shorter interval could not tell a slow sender from a paced one). At the
// end of an interval:
//
//   - a connection that sent nothing in two intervals in a row leaves the
//     active set;
//   - one that sent less than half of the share it was given is limited by
//     its own demand (the application posts less, or a path is slow): its
//     demand is taken as twice what it sent (but at least half of what it
//     was given), so it can grow quickly;
//   - the link (× HintUtilization when two or more send, × the drain
//     scale below) is water-filled: demands below the level get what they
//     ask for, everyone else gets the level.
//
// A connection that starts sending in the middle of an interval joins at
// once, as unlimited, and the level drops for everyone: an incast's
// senders are counted as their first packets arrive, not an interval later.
type fairShare struct {
	start    verbs.Time    // start of the current interval
	interval time.Duration // length of the current interval
	active   []*Conn       // connections that sent in this interval or the last
	level    float64       // share of an unlimited sender, bits/s
	takers   int           // senders that take the level (not held to a smaller demand)
	scratch  []float64

	// Queue drain: over every HintInterval the receiver counts the bytes
	// that arrived CE-marked. Shares that add up to less than the link
	// empty a queue only slowly (at 1 - HintUtilization of the link), so
	// while a fraction f of the bytes arrive marked (the switch's queue is
	// above its marking threshold) the shares add up to (1 - f/2) of the
	// usual: a queue left by an incast's first burst drains in a few RTTs.
	markStart verbs.Time
	markBytes int
	allBytes  int
	scale     float64 // min(1 - f/2, the delay scale) of the last interval

	// Queueing delay, as the receiver sees it without synchronized
	// clocks: each packet's one-way delay (arrival time minus the
	// sender's send stamp) above the smallest one seen from that
	// connection. The clocks' offset cancels out; what is left is the
	// queue the packet waited in. A standing queue that marks nothing
	// (below the switch's threshold) still adds latency, and shares that
	// add up to HintUtilization of the link drain it only slowly. Many
	// senders paced at random phases queue a little even below the link
	// rate, so only the average wait above HintInterval/2 counts: while it
	// is w, the shares shrink by w/(8·HintInterval) (at most by half), and
	// a standing queue empties within a few intervals. (A connection whose
	// very first packet already queued has its minimum set too high and
	// reports too little delay; CE marks still cover that queue.)
	delaySum time.Duration
	delayN   int
}

// rxShare is a connection's record in the receiver's fairShare.
type rxShare struct {
	listed bool
	quiet  int           // consecutive intervals without a packet
	minOWD time.Duration // smallest one-way delay (with the clocks' offset) seen
	joined verbs.Time    // when it (re)joined the active set
	bytes  int           // received in the current interval
	demand float64       // bits/s; 0 = unlimited
}

// enabled reports whether the endpoint gives rate hints.
func (f *fairShare) enabled(cfg *Config) bool { return cfg.LinkRateBps > 0 && !cfg.DisableCC }

// capacity is what the shares add up to.
//
// A lone sender gets the whole link: its packets leave its own NIC one
// after another and cannot pile up at a receiver port of the same rate.
// Several senders pace independently, their packets arrive at random
// phases, and near full load the port's queue would grow without bound
// (as any single-server queue does): HintUtilization keeps them below.
func (f *fairShare) capacity(cfg *Config) float64 {
	s := f.scale
	if s == 0 {
		s = 1
	}
	u := cfg.HintUtilization
	if len(f.active) <= 1 {
		u = 1
	}
	return cfg.LinkRateBps * u * s
}

// onReceive counts n bytes of a sequenced packet from c.
func (f *fairShare) onReceive(cfg *Config, c *Conn, now verbs.Time, n int, ce bool, sentAt verbs.Time) {
	if !f.enabled(cfg) {
		return
	}
	if len(f.active) == 0 {
		f.start, f.interval = now, cfg.HintInterval
	} else if now.Sub(f.start) >= f.interval {
		f.roll(cfg, now)
	}
	if now.Sub(f.markStart) >= cfg.HintInterval {
		s := 1.0
		if f.allBytes > 0 {
			s -= float64(f.markBytes) / float64(f.allBytes) / 2
		}
		if f.delayN > 0 {
			qd := f.delaySum / time.Duration(f.delayN)
			over := qd - cfg.HintInterval/2
			d := 1 - min(0.5, max(0, float64(over))/float64(8*cfg.HintInterval))
			s = min(s, d)
		}
		f.markStart, f.markBytes, f.allBytes = now, 0, 0
		f.delaySum, f.delayN = 0, 0
		if s != f.scale {
			f.scale = s
			f.refill(cfg)
		}
	}
	f.allBytes += n
	if ce {
		f.markBytes += n
	}
	r := &c.share
	if !r.listed {
		r.listed, r.joined, r.bytes, r.demand, r.quiet = true, now, 0, 0, 0
		f.active = append(f.active, c)
		f.refill(cfg)
	}
	r.bytes += n
	if owd := now.Sub(sentAt); sentAt != 0 {
		if r.minOWD == 0 || owd < r.minOWD {
			r.minOWD = owd
		}
		f.delaySum += owd - r.minOWD
		f.delayN++
	}
}

// hintMbps is c's share in Mbit/s for its ACKs (0 when hints are off or c
// is not sending to us).
func (f *fairShare) hintMbps(cfg *Config, c *Conn) uint32 {
	if !f.enabled(cfg) || !c.share.listed {
		return 0
	}
	bps := f.level
	if d := c.share.demand; d > 0 && d < bps && f.takers > 0 {
		// Held to its demand so that others can have the rest; with
		// no one to take it (a lone sender, or every sender limited)
		// that would only slow it down when its demand grows.
		bps = d
	}
	m := bps / 1e6
	if m < 1 {
		return 1
	}
	if m > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(m)
}

// ackHold is how long the receiver holds an ACK for a path of c (from the
// path's first unacknowledged packet). AckDelay, except while no queue
// is draining here (the last interval saw no CE marks and no queueing
// delay: scale 1) and c has been sending for 8 intervals: then as long
// as c needs to send AckEvery full packets at its hint, up to
// 4 × AckDelay. A connection given a small share
// (one of many senders: an all-to-all, many channels) sends a packet
// every few microseconds, and acknowledging each one with a frame of its
// own would take as much of the reverse link as its data takes of the
// forward one; at the hint, AckEvery packets take that long anyway. While
// a queue drains, ACKs (their marks, their hints) go out within AckDelay,
// which is what converges an incast in a few RTTs. The sender's in-flight
// cap follows the longer hold through its smoothed RTT (connLimit).
func (f *fairShare) ackHold(cfg *Config, c *Conn, now verbs.Time) time.Duration {
	d := cfg.AckDelay
	if f.scale != 1 || now.Sub(c.share.joined) < 8*cfg.HintInterval {
		// Draining, no interval measured yet, hints off, or c only
		// just joined (its share is still settling).
		return d
	}
	hint := float64(f.hintMbps(cfg, c)) * 1e6
	if hint <= 0 {
		return d
	}
	t := time.Duration(float64(cfg.AckEvery*c.limit.pktBytes) * 8 / hint * 1e9)
	return min(max(d, t), 4*cfg.AckDelay)
}

// remove takes a closing connection out of the active set.
func (f *fairShare) remove(cfg *Config, c *Conn) {
	if !c.share.listed {
		return
	}
	c.share.listed = false
	if i := slices.Index(f.active, c); i >= 0 {
		f.active = slices.Delete(f.active, i, i+1)
	}
	f.refill(cfg)
}

// roll ends the interval: classify every active connection by what it
// sent, drop the idle ones, and water-fill again.
func (f *fairShare) roll(cfg *Config, now verbs.Time) {
	elapsed := now.Sub(f.start).Seconds()
	keep := f.active[:0]
	for _, c := range f.active {
		r := &c.share
		if r.bytes == 0 {
			// Quiet for a whole interval. A paced sender may just have
			// been unlucky (a packet lost, a timeout): it leaves only
			// after a second quiet interval, so that the level does not
			// jump up and down with every hiccup.
			r.quiet++
			if r.quiet >= 2 {
				r.listed = false
				continue
			}
			keep = append(keep, c)
			continue
		}
		r.quiet = 0
		given := f.level
		if r.demand > 0 && r.demand < given {
			given = r.demand
		}
		rate := float64(r.bytes) * 8 / elapsed
		switch {
		case r.joined > f.start:
			r.demand = 0 // joined mid-interval: its rate says nothing yet
		case rate < given/2:
			// Not using its share. Halve what it is offered at most
			// once per interval: a sender that was merely unlucky (its
			// packets lost, or waiting on a timeout) must not spiral
			// down to nothing.
			r.demand = max(2*rate, given/2)
		default:
			r.demand = 0
		}
		r.bytes = 0
		keep = append(keep, c)
	}
	clear(f.active[len(keep):])
	f.active = keep
	f.refill(cfg)
	f.start = now
	// At least four full packets at the level.
	f.interval = cfg.HintInterval
	if f.level > 0 {
		pkt := float64(FullWriteLen(cfg.MTU)) * 8
		if d := time.Duration(4 * pkt / f.level * 1e9); d > f.interval {
			f.interval = d
		}
	}
}

// refill computes the water level: demands are satisfied in ascending
// order while they are below the even split of what remains.
func (f *fairShare) refill(cfg *Config) {
	f.scratch = f.scratch[:0]
	for _, c := range f.active {
		if d := c.share.demand; d > 0 {
			f.scratch = append(f.scratch, d)
		}
	}
	slices.Sort(f.scratch)
	remain := f.capacity(cfg)
	n := len(f.active)
	for _, d := range f.scratch {
		if d*float64(n) > remain {
			break
		}
		remain -= d
		n--
	}
	f.takers = n
	if n > 0 {
		f.level = remain / float64(n)
	} else {
		f.level = f.capacity(cfg)
	}
}
