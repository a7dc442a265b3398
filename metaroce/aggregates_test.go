package metaroce

import (
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Every white-box test runs with the aggregates checked, at every use,
// against the walks over every path, pending ACK and active stream that
// they replace (below): a change of a path, ACK or stream that fails to
// reach its aggregate panics in whatever test exercises it. The packet-path
// benchmark turns the checks off (SetAggregateChecks).
func init() { SetAggregateChecks(true) }

// SetAggregateChecks turns the checks on or off and returns the old
// setting.
func SetAggregateChecks(on bool) (was bool) {
	was = checkDeadline != nil
	if on {
		checkDeadline, checkFastest, checkAckDue, checkPick = checkDeadlineWalk, checkFastestWalk, checkAckDueWalk, checkPickWalk
	} else {
		checkDeadline, checkFastest, checkAckDue, checkPick = nil, nil, nil, nil
	}
	return was
}

func checkDeadlineWalk(c *Conn, now, d verbs.Time, ready bool) {
	wd, wr := c.walkDeadline(now)
	if wd != d || wr != ready {
		panic(fmt.Sprintf("metaroce: conn %d at %d: aggregates give deadline %d ready %v, the walk %d %v",
			c.local, now, d, ready, wd, wr))
	}
}

func checkFastestWalk(c *Conn, fastest time.Duration) {
	if w := c.fastestSRTT(); w != fastest {
		panic(fmt.Sprintf("metaroce: conn %d: aggregate fastest srtt %v, the walk %v", c.local, fastest, w))
	}
}

func checkAckDueWalk(c *Conn, now verbs.Time, due bool) {
	w := false
	for i := 0; i < c.ackList.Len(); i++ {
		r := &c.rx[*c.ackList.At(i)]
		if r.ackNow || r.ackDue <= now {
			w = true
		}
	}
	if w != due {
		panic(fmt.Sprintf("metaroce: conn %d at %d: aggregate ACK due %v, the walk %v", c.local, now, due, w))
	}
}

// walkCredits are the credits of each connection's paths as the walking
// picker (walkPick) keeps them.
var walkCredits = map[*Conn][]int{}

// walkPick is the picker that adds every path's weight to its credit on
// every pick: what PathPicker must choose.
func walkPick(credit []int, paths []txPath, plane int) int {
	best, total := -1, 0
	for i := range paths {
		if plane != anyPlane && int(paths[i].plane) != plane {
			continue
		}
		r := paths[i].room()
		if r <= 0 {
			continue
		}
		r = max(1, r*paths[i].speed/speedOne)
		total += r
		credit[i] += r
		if best < 0 || credit[i] > credit[best] {
			best = i
		}
	}
	if best >= 0 {
		credit[best] -= total
	}
	return best
}

func checkPickWalk(c *Conn, plane, chosen int) {
	credit := walkCredits[c]
	if credit == nil {
		credit = make([]int, len(c.tx))
		walkCredits[c] = credit
	}
	if w := walkPick(credit, c.tx, plane); w != chosen {
		panic(fmt.Sprintf("metaroce: conn %d plane %d: picker chose %d, the walk %d", c.local, plane, chosen, w))
	}
	for i := range credit {
		if got := c.picker.credit(i); got != int64(credit[i]) {
			panic(fmt.Sprintf("metaroce: conn %d path %d: picker credit %d, the walk's %d", c.local, i, got, credit[i]))
		}
	}
}

// fastestSRTT is the smallest smoothed RTT among c's healthy paths (0 if
// none has a sample), by walking them.
func (c *Conn) fastestSRTT() time.Duration {
	var fastest time.Duration
	for i := range c.tx {
		if q := &c.tx[i]; q.hasRTT && !q.failed && (fastest == 0 || q.srtt < fastest) {
			fastest = q.srtt
		}
	}
	return fastest
}

// walkDeadline is computeDeadline by walking every pending ACK, path and
// active stream.
func (c *Conn) walkDeadline(now verbs.Time) (d verbs.Time, ready bool) {
	d = verbs.Never
	at := func(t verbs.Time) {
		if t < d {
			d = t
		}
	}
	cfg := &c.ep.cfg
	switch c.state {
	case connConnecting, connClosing:
		at(c.retryAt)
		return d, c.ctrl.Len() > 0
	case connEstablished:
	default:
		return verbs.Never, false
	}
	ready = c.ctrl.Len() > 0
	if c.resend.Len() > 0 || c.moved.Len() > 0 {
		if c.limit.paced(now) {
			at(c.limit.nextSend)
		} else {
			ready = true
		}
	}
	newData := c.jobs.Len() > 0
	for i := 0; i < c.ackList.Len(); i++ {
		r := &c.rx[*c.ackList.At(i)]
		if r.ackNow || r.ackDue <= now {
			ready = true
		} else {
			at(r.ackDue)
		}
	}
	for i := range c.tx {
		p := &c.tx[i]
		if p.failed {
			at(p.reprobeAt)
		} else if p.inUse > 0 {
			at(p.lastProgress.Add(c.pathRTO(p)))
		}
	}
	for i := 0; i < c.active.Len(); i++ {
		q := *c.active.At(i)
		if q.blockedUntil > now {
			at(q.blockedUntil)
		} else {
			newData = true
		}
	}
	if newData {
		if t := c.limit.blockedUntil(cfg, now, c.resend.Len()); t <= now {
			ready = true
		} else {
			at(t)
		}
	}
	ka := c.lastRx
	if c.lastKeepalive > ka {
		ka = c.lastKeepalive
	}
	at(ka.Add(cfg.KeepaliveInterval))
	at(c.lastRx.Add(cfg.PeerDeadTimeout))
	if c.qpCheckAt != 0 {
		at(c.qpCheckAt) // the QPs' no-ACK bound (qptimers.go)
	}
	if c.proveAt != 0 {
		at(c.proveAt)
	}
	if ready && c.halfOpen.in && !c.amp.allows(c.ampBound()) {
		ready = false // the anti-amplification budget (amplification.go)
	}
	return d, ready
}

// TestAggregatesChecked makes sure the checks above are on, so that the
// other tests cannot pass without them.
func TestAggregatesChecked(t *testing.T) {
	if checkDeadline == nil || checkFastest == nil || checkAckDue == nil || checkPick == nil {
		t.Fatal("aggregate checks are off")
	}
}
