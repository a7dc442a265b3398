package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// pathCC is one path's congestion controller: a window in packets moved by
// ECN echoes, DCTCP style. Each round (about one smoothed RTT of the path)
// the fraction of acknowledged packets that were CE-marked is folded into
// alpha with gain g; a round with any mark cuts the window by alpha/2, and
// every acknowledged packet grows it by 1/window (one packet per round).
//
// A mark trims only the path that saw it: the other paths of the same
// connection crossed other queues. Loss does not cut the window: on lossy
// Ethernet most loss is not congestion (the switches mark long before
// their buffers overflow), and loss repair is per packet.
type pathCC struct {
	cwnd  float64 // packets; room() uses its integer part
	alpha float64 // smoothed marked fraction, 0..1

	roundEnd    verbs.Time // the current round ends when an ACK arrives after this
	roundAcked  uint32     // packets acknowledged in the current round
	roundMarked uint32     // CE echoes in the current round
	lastMarked  verbs.Time // last ACK that echoed a mark (0 = never)
	hotRounds   int        // consecutive rounds with alpha > rerollAlpha

	// loss is the recent loss rate: an average over about 32 packet fates
	// (each retired packet counts 0, each packet found lost counts 1).
	loss float64
}

const (
	// lossGain is the weight of one packet's fate in pathCC.loss.
	lossGain = 1.0 / 32
	// rerollAlpha is the marked fraction above which a path counts as
	// persistently congested (see Config.RerollRounds).
	rerollAlpha = 0.5
)

// window is the number of packets the path may have in flight.
func (cc *pathCC) window() int {
	if cc.cwnd < 1 {
		return 1
	}
	return int(cc.cwnd)
}

// onAck folds one ACK block into the controller: acked packets newly
// retired, marked CE echoes newly reported. srtt is the path's smoothed RTT
// (or the connection's, before the path has its own). It reports whether a
// round ended, so the caller can look at alpha.
func (cc *pathCC) onAck(cfg *Config, now verbs.Time, acked, marked int, srtt time.Duration) (roundEnded bool) {
	if cfg.DisableCC {
		return false
	}
	cc.roundAcked += uint32(acked)
	cc.roundMarked += uint32(marked)
	if marked > 0 {
		cc.lastMarked = now
	}
	max := float64(cfg.PathWindow)
	if acked > 0 && cc.cwnd < max {
		cc.cwnd += float64(acked) / cc.cwnd
		if cc.cwnd > max {
			cc.cwnd = max
		}
	}
	if now < cc.roundEnd || cc.roundAcked == 0 {
		return false
	}
	f := float64(cc.roundMarked) / float64(cc.roundAcked)
	if f > 1 {
		f = 1
	}
	g := cfg.ECNGain
	cc.alpha = (1-g)*cc.alpha + g*f
	if cc.roundMarked > 0 {
		cc.cwnd *= 1 - cc.alpha/2
		if min := float64(cfg.MinWindow); cc.cwnd < min {
			cc.cwnd = min
		}
	}
	cc.roundAcked, cc.roundMarked = 0, 0
	cc.roundEnd = now.Add(srtt)
	return true
}

// congested reports recent signs of congestion on the path: a CE echo
// within the last few RTTs.
func (cc *pathCC) congested(now verbs.Time, srtt time.Duration) bool {
	return cc.lastMarked != 0 && now.Sub(cc.lastMarked) <= 4*srtt
}

// onTimeout collapses the window after a tail-loss timeout on a path that
// is congested (not failed): as little as possible goes into a queue that
// could not deliver a packet within an RTO.
func (cc *pathCC) onTimeout(cfg *Config) {
	if cfg.DisableCC {
		return
	}
	cc.cwnd = float64(cfg.MinWindow)
}

// reset starts the controller afresh, with a full window: a restored or
// re-rolled path is a new route whose congestion we know nothing about.
func (cc *pathCC) reset(cfg *Config) {
	loss := cc.loss
	*cc = pathCC{cwnd: float64(cfg.PathWindow), loss: loss}
}

// lost and delivered update the loss average.
func (cc *pathCC) lost()      { cc.loss += lossGain * (1 - cc.loss) }
func (cc *pathCC) delivered() { cc.loss -= lossGain * cc.loss }
