package metaroce

import (
	"time"

	"github.com/metaroce/metaroce/internal/queue"
	"github.com/metaroce/metaroce/verbs"
)

// connAgg holds what computeDeadline, ackDueNow and onAck need of every
// path, ACK and stream of a connection, kept up to date as those change,
// so that the work per packet does not grow with the number of paths,
// pending ACKs or active streams. Each aggregate gives exactly the value
// the walk over everything gave (the white-box tests check every call
// against that walk: aggregates_test.go).
//
// Paths. A path whose state changed is marked dirty (pathChanged) and its
// entries are brought up to date at the next flush, before anything reads
// them. The deadline of a path (Conn.computeDeadline) is
//
//	failed:             reprobeAt
//	busy (inUse > 0):   lastProgress + min(rto, H)
//
// where rto is the path's own when it has an RTT sample, and H (the
// connection-wide RTO while the connection is starved, else none) is the
// same for every path. The minimum over busy paths with samples is
// therefore min(min(lastProgress + rto), min(lastProgress) + H): one heap
// for each term. A busy path without a sample of its own borrows the
// connection's estimate, which every ACK moves, and doubles it for each
// timeout in a row: all of those without a timeout have the same RTO, so
// the earliest is the one that made progress first (a third heap); the
// few after a timeout are kept in a list and computed one by one.
//
// ACKs and streams. A pending ACK that must go now (ackNow) and one whose
// delay ran out are counted; the others are in a heap by due time. An
// active stream past its RNR back-off is counted; the others are in a heap
// by the end of the back-off. An entry whose time comes is moved from the
// heap to the count when a caller passes a now at or after it: the
// endpoint's times never go backwards.
type connAgg struct {
	dirty     []*txPath
	deadlines idxHeap   // failed: reprobeAt; busy with a sample: lastProgress + rto
	progress  idxHeap   // busy with a sample: lastProgress
	srtts     idxHeap   // not failed, with a sample: srtt
	fresh     idxHeap   // busy, not failed, no sample, no timeout: lastProgress
	noRTT     []*txPath // busy, not failed, no sample, after a timeout

	acksReady int     // queued ACKs with ackNow or past their due time
	acksDue   idxHeap // the other queued ACKs (by path), by ackDue

	streamsFree    int                         // active streams past their back-off
	streamsBlocked queue.TimerHeap[*QueuePair] // the other active streams, by blockedUntil
}

// pathAgg is a path's part of connAgg.
type pathAgg struct {
	dirty bool
	noRTT int // position in connAgg.noRTT + 1; 0 = not there
	// keys are the path's keys in fresh, deadlines, progress and srtts
	// (Never: not there), so that a refresh skips the heaps whose key
	// did not change: a packet sent changes only the path's weight.
	keys [4]int64
}

// Indexes of pathAgg.keys.
const (
	keyFresh = iota
	keyDeadline
	keyProgress
	keySRTT
)

// newPathAgg is a path's part of connAgg before its first refresh: in
// none of the heaps.
func newPathAgg() pathAgg {
	n := int64(verbs.Never)
	return pathAgg{keys: [4]int64{n, n, n, n}}
}

// setKey sets id's key in h to key unless it is that already (*k: the
// key last set there).
func setKey(h *idxHeap, k *int64, id int, key int64) {
	if *k != key {
		*k = key
		h.Set(id, key)
	}
}

// ackAgg is a pending ACK's part of connAgg.
type ackAgg struct {
	expired bool // its ackDue has passed (counted in acksReady)
	counted bool // counted in acksReady
}

// streamAgg is an active stream's part of connAgg.
type streamAgg struct {
	blocked queue.Timer
	free    bool // its back-off has passed (counted in streamsFree while active)
	counted bool
}

// reset empties the aggregates for a connection whose paths are c.tx.
func (a *connAgg) reset() {
	*a = connAgg{
		streamsBlocked: queue.NewTimerHeap(func(q *QueuePair) *queue.Timer { return &q.agg.blocked }),
	}
}

// resetPaths sizes the path aggregates for n paths.
func (a *connAgg) resetPaths(n int) {
	a.deadlines, a.progress = newIdxHeap(n, nil), newIdxHeap(n, nil)
	a.srtts, a.fresh = newIdxHeap(n, nil), newIdxHeap(n, nil)
	a.acksDue = newIdxHeap(n, nil)
	a.dirty, a.noRTT = make([]*txPath, 0, n), make([]*txPath, 0, n)
}

// pathChanged marks p for a refresh of its entries at the next flush. Call
// it whenever p's failed, reprobeAt, inUse, lastProgress, timeouts or RTT
// estimate may have changed.
func (c *Conn) pathChanged(p *txPath) {
	if !p.agg.dirty {
		p.agg.dirty = true
		c.agg.dirty = append(c.agg.dirty, p)
	}
}

// flushPaths brings the entries of every dirty path up to date.
func (c *Conn) flushPaths() {
	for i, p := range c.agg.dirty {
		p.agg.dirty = false
		c.refreshPath(p)
		c.agg.dirty[i] = nil
	}
	c.agg.dirty = c.agg.dirty[:0]
}

func (c *Conn) refreshPath(p *txPath) {
	a := &c.agg
	busy := !p.failed && p.inUse > 0
	deadline, progress, srtt, fresh := verbs.Never, verbs.Never, verbs.Never, verbs.Never
	switch {
	case p.failed:
		deadline = p.reprobeAt
	case busy && p.hasRTT:
		deadline = p.lastProgress.Add(p.rto(&c.ep.cfg, &c.rtt))
		progress = p.lastProgress
	}
	if p.hasRTT && !p.failed {
		srtt = verbs.Time(p.srtt)
	}
	if busy && !p.hasRTT && p.timeouts == 0 {
		fresh = p.lastProgress
	}
	id, k := int(p.id), &p.agg.keys
	setKey(&a.fresh, &k[keyFresh], id, int64(fresh))
	c.picker.weigh(int(p.id), pathWeight(p))
	setKey(&a.deadlines, &k[keyDeadline], id, int64(deadline))
	setKey(&a.progress, &k[keyProgress], id, int64(progress))
	setKey(&a.srtts, &k[keySRTT], id, int64(srtt))
	if in := p.agg.noRTT > 0; in != (busy && !p.hasRTT && p.timeouts > 0) {
		if !in {
			a.noRTT = append(a.noRTT, p)
			p.agg.noRTT = len(a.noRTT)
		} else {
			i, last := p.agg.noRTT-1, len(a.noRTT)-1
			a.noRTT[i] = a.noRTT[last]
			a.noRTT[i].agg.noRTT = i + 1
			a.noRTT[last] = nil
			a.noRTT = a.noRTT[:last]
			p.agg.noRTT = 0
		}
	}
}

// allPathsChanged marks every path (after something that changed them all).
func (c *Conn) allPathsChanged() {
	for i := range c.tx {
		c.pathChanged(&c.tx[i])
	}
}

// pathDeadline is the earliest deadline of c's paths (Never if none).
func (c *Conn) pathDeadline() verbs.Time {
	c.flushPaths()
	a := &c.agg
	d := verbs.Never
	if a.deadlines.Len() > 0 {
		d = verbs.Time(a.deadlines.Min())
	}
	if a.progress.Len() > 0 && c.starved() && c.rtt.hasRTT {
		cfg := &c.ep.cfg
		h := max(cfg.MinRTO, c.rtt.srtt+4*c.rtt.rttvar+cfg.AckDelay)
		d = min(d, verbs.Time(a.progress.Min()).Add(h))
	}
	if a.fresh.Len() > 0 {
		// They share one RTO: the first to make progress is due first.
		p := &c.tx[a.fresh.Top()]
		d = min(d, p.lastProgress.Add(c.pathRTO(p)))
	}
	for _, p := range a.noRTT {
		d = min(d, p.lastProgress.Add(c.pathRTO(p)))
	}
	return d
}

// fastestPath is fastestSRTT from the aggregate.
func (c *Conn) fastestPath() time.Duration {
	c.flushPaths()
	if c.agg.srtts.Len() == 0 {
		return 0
	}
	return time.Duration(c.agg.srtts.Min())
}

// ackChanged brings path i's ACK entry up to date after its ACK state
// changed.
func (c *Conn) ackChanged(i verbs.PathID) {
	a := &c.agg
	r := &c.rx[i]
	ready := r.queued && (r.ackNow || r.agg.expired)
	if ready != r.agg.counted {
		r.agg.counted = ready
		if ready {
			a.acksReady++
		} else {
			a.acksReady--
		}
	}
	due := verbs.Never
	if r.queued && !ready {
		due = r.ackDue
	}
	a.acksDue.Set(int(i), int64(due))
}

// acksDueBy moves the ACKs due at now to the ready count and returns the
// earliest due time of the others (Never if none).
func (c *Conn) acksDueBy(now verbs.Time) verbs.Time {
	a := &c.agg
	for a.acksDue.Len() > 0 && verbs.Time(a.acksDue.Min()) <= now {
		i := a.acksDue.Top()
		c.rx[i].agg.expired = true
		c.ackChanged(verbs.PathID(i))
	}
	if a.acksDue.Len() == 0 {
		return verbs.Never
	}
	return verbs.Time(a.acksDue.Min())
}

// streamChanged brings q's entry up to date after q joined or left the
// active round robin or its back-off changed.
func (c *Conn) streamChanged(q *QueuePair) {
	a := &c.agg
	free := q.active && q.agg.free
	if free != q.agg.counted {
		q.agg.counted = free
		if free {
			a.streamsFree++
		} else {
			a.streamsFree--
		}
	}
	until := verbs.Never
	if q.active && !q.agg.free {
		until = q.blockedUntil
	}
	q.agg.blocked.Deadline = int64(until)
	a.streamsBlocked.Set(q)
}

// streamsBlockedBy moves the streams whose back-off ended by now to the
// free count and returns the earliest end of the others (Never if none).
func (c *Conn) streamsBlockedBy(now verbs.Time) verbs.Time {
	a := &c.agg
	for a.streamsBlocked.Len() > 0 && verbs.Time(a.streamsBlocked.Min()) <= now {
		q := a.streamsBlocked.PopMin()
		q.agg.free = true
		c.streamChanged(q)
	}
	if a.streamsBlocked.Len() == 0 {
		return verbs.Never
	}
	return verbs.Time(a.streamsBlocked.Min())
}

// Test hooks (nil outside the white-box tests): they compare each
// aggregate with the walk over everything it replaces.
var (
	checkDeadline func(c *Conn, now, d verbs.Time, ready bool)
	checkFastest  func(c *Conn, fastest time.Duration)
	checkAckDue   func(c *Conn, now verbs.Time, due bool)
	checkPick     func(c *Conn, plane, chosen int)
)
