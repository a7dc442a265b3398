package rocev2

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// rateLimiter is DCQCN's reaction point (the sender's rate machine) for one
// QP.
//
// A QP starts unlimited, at line rate. Its first CNP starts rate limiting:
// alpha = InitialAlpha, and the rate is cut. While limited:
//
//   - CNP: alpha notes a CNP in the current alpha period; the rate is cut at
//     once if the last cut is at least RateReduceMonitorPeriod old, else at
//     the end of that period (several CNPs in one period cut once).
//   - Cut: the target Rt becomes the current rate Rc (see
//     DCQCNConfig.ClampTargetRate), Rc *= (1 - alpha/2), bounded below by
//     MinDecFactor*Rc and MinRateBps; the timer, byte counter and both
//     stage counts (T, BC) restart.
//   - Alpha period end (every AlphaUpdatePeriod): alpha = (1-g)alpha + g if
//     a CNP arrived in the period, else (1-g)alpha.
//   - Rate-increase event, when the timer expires (every TimeReset: T++) or
//     ByteReset bytes have been sent (BC++): fast recovery while
//     max(T, BC) <= F (Rt unchanged), hyper increase when min(T, BC) > F
//     (Rt += R_HAI), additive increase otherwise (Rt += R_AI); then
//     Rc = (Rt + Rc) / 2, Rt capped at the maximum rate.
//   - Once Rt is at the maximum and Rc within R_AI of it, the limiter is
//     released: the QP is unlimited again and forgets alpha.
//
// The timers are evaluated lazily: the limiter keeps the time of each
// pending event and replays every event due, in time order, whenever it is
// consulted (before a send, at a CNP). The outcome is the same as running
// real timers, and an idle QP costs no timer events at all.
type rateLimiter struct {
	cfg     *DCQCNConfig
	maxRate float64

	limited bool
	rc, rt  float64 // current and target rate, bps
	alpha   float64

	alphaEnd    verbs.Time // end of the current alpha period
	cnpInPeriod bool

	t, bc      int        // timer and byte-counter stages since the last cut
	timerAt    verbs.Time // next rate-increase timer expiry
	bytes      int64      // bytes sent since the last byte-counter event
	nextCutAt  verbs.Time // earliest time of the next cut
	cutPending bool
	firstCut   bool // the next cut is the first of this limiting episode

	cuts, increases, releases uint64
}

func newRateLimiter(cfg *DCQCNConfig, line float64) rateLimiter {
	maxRate := line
	if cfg.MaxRateBps > 0 && cfg.MaxRateBps < line {
		maxRate = cfg.MaxRateBps
	}
	return rateLimiter{cfg: cfg, maxRate: maxRate, rc: maxRate, rt: maxRate}
}

// rate returns the current rate at now (the maximum when unlimited).
func (r *rateLimiter) rate(now verbs.Time) float64 {
	r.advance(now)
	return r.rc
}

// advance replays every cut and timer event due at or before now.
func (r *rateLimiter) advance(now verbs.Time) {
	for r.limited || r.cutPending {
		next := verbs.Never
		if r.cutPending {
			next = r.nextCutAt
		}
		timer := r.limited && r.timerAt < next
		if timer {
			next = r.timerAt
		}
		if next > now {
			return
		}
		if timer {
			r.t++
			r.timerAt += verbs.Time(r.cfg.TimeReset)
			r.increase(next)
		} else {
			r.cutPending = false
			r.cut(next)
		}
	}
}

// advanceAlpha closes every alpha period that ended by now.
func (r *rateLimiter) advanceAlpha(now verbs.Time) {
	if !r.limited || now < r.alphaEnd {
		return
	}
	g := r.cfg.G
	if r.cnpInPeriod {
		r.alpha = (1-g)*r.alpha + g
	} else {
		r.alpha *= 1 - g
	}
	r.cnpInPeriod = false
	k := verbs.Time(r.cfg.AlphaUpdatePeriod)
	r.alphaEnd += k
	if now >= r.alphaEnd {
		m := int64((now-r.alphaEnd)/k) + 1
		r.alpha *= powInt(1-g, m)
		r.alphaEnd += verbs.Time(m) * k
	}
}

// powInt returns x^n by repeated squaring (deterministic on every platform).
func powInt(x float64, n int64) float64 {
	p := 1.0
	for n > 0 {
		if n&1 != 0 {
			p *= x
		}
		x *= x
		n >>= 1
	}
	return p
}

// onCNP handles a CNP for this QP arriving at now.
func (r *rateLimiter) onCNP(now verbs.Time) {
	r.advance(now)
	if !r.limited {
		r.limited = true
		r.alpha = r.cfg.InitialAlpha
		r.alphaEnd = now + verbs.Time(r.cfg.AlphaUpdatePeriod)
		r.cnpInPeriod = false
		r.rc, r.rt = r.maxRate, r.maxRate
		r.t, r.bc, r.bytes = 0, 0, 0
		r.timerAt = now + verbs.Time(r.cfg.TimeReset)
		r.nextCutAt = now
		r.firstCut = true
		if f := r.cfg.RateOnFirstCNPBps; f > 0 {
			r.rc, r.rt = min(f, r.maxRate), min(f, r.maxRate)
			r.nextCutAt = now + verbs.Time(r.cfg.RateReduceMonitorPeriod)
			r.firstCut = false
			return
		}
	} else {
		r.advanceAlpha(now)
		r.cnpInPeriod = true
	}
	if now >= r.nextCutAt {
		r.cutPending = false
		r.cut(now)
	} else {
		r.cutPending = true
	}
}

// cut reduces the rate at time at.
func (r *rateLimiter) cut(at verbs.Time) {
	r.advanceAlpha(at)
	old := r.rc
	if r.firstCut || r.cfg.ClampTargetRate || r.bc > 0 || (!r.cfg.NoClampAfterTimeInc && r.t > 0) {
		r.rt = old
	}
	r.firstCut = false
	rc := old * (1 - r.alpha/2)
	rc = max(rc, old*r.cfg.MinDecFactor, r.cfg.MinRateBps)
	r.rc = min(rc, old)
	r.t, r.bc, r.bytes = 0, 0, 0
	r.timerAt = at + verbs.Time(r.cfg.TimeReset)
	r.nextCutAt = at + verbs.Time(r.cfg.RateReduceMonitorPeriod)
	r.cuts++
}

// onSent counts n bytes sent at now towards the byte counter.
func (r *rateLimiter) onSent(now verbs.Time, n int) {
	r.advance(now)
	if !r.limited {
		return
	}
	r.bytes += int64(n)
	for r.limited && r.bytes >= int64(r.cfg.ByteReset) {
		r.bytes -= int64(r.cfg.ByteReset)
		r.bc++
		r.increase(now)
	}
}

// increase runs one rate-increase event.
func (r *rateLimiter) increase(at verbs.Time) {
	f := r.cfg.Threshold
	switch {
	case max(r.t, r.bc) <= f:
		// fast recovery: towards the target, which stays
	case min(r.t, r.bc) > f:
		r.rt += r.cfg.HAIRateBps
	default:
		r.rt += r.cfg.AIRateBps
	}
	r.rt = min(r.rt, r.maxRate)
	r.rc = (r.rt + r.rc) / 2
	r.increases++
	if r.rt >= r.maxRate && r.maxRate-r.rc <= r.cfg.AIRateBps {
		r.limited, r.cutPending = false, false
		r.rc, r.rt = r.maxRate, r.maxRate
		r.releases++
	}
}

// txDuration is how long n bytes take at rate bps, in (fractional) ns.
func txDuration(n int, bps float64) float64 { return float64(n) * 8e9 / bps }

// notifier is DCQCN's notification point for one QP: CE-marked arrivals
// turn into at most one CNP per interval.
type notifier struct {
	interval time.Duration
	last     verbs.Time
	sent     bool // last is valid
	pending  bool
}

// onCE records a CE-marked arrival at now and reports whether a CNP is due.
func (n *notifier) onCE(now verbs.Time) bool {
	if n.pending || (n.sent && now.Sub(n.last) < n.interval) {
		return false
	}
	n.pending, n.sent, n.last = true, true, now
	return true
}
