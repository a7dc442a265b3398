package main

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// bwRunner keeps TxDepth work requests outstanding on every QP of n until
// Iters per QP have completed (or, with a Duration, until it has passed),
// and measures what completed. It is driven by its owner's loop: pump
// posts, onWC takes completions; nothing in it blocks.
type bwRunner struct {
	n      *node
	op     verbs.WROpcode
	size   int
	iters  int
	dur    time.Duration
	depth  int
	remote regionInfo
	slot   int // bytes between QPs' slots in both buffers
	// verify (--verify): message i of a QP uses sub-slot i mod depth,
	// stride bytes apart, filled with its pattern (WRITE, SEND) or checked
	// against the slot's (READ).
	verify bool
	stride int

	outstanding []int
	posted      []int
	completed   int
	start, end  time.Time
	stopAt      time.Time
	stopped     bool // interrupted: post nothing more

	lastT    time.Time
	lastDone int
	peak     float64 // bytes/s
	err      error
}

func newBWRunner(n *node, test string, size, iters int, dur time.Duration, depth int, remote regionInfo, slot int, verify bool) *bwRunner {
	op := verbs.WRWrite
	switch test {
	case "send_bw":
		op = verbs.WRSend
	case "read_bw":
		op = verbs.WRRead
	}
	return &bwRunner{n: n, op: op, size: size, iters: iters, dur: dur, depth: depth, remote: remote, slot: slot,
		verify: verify, stride: n.stride, outstanding: make([]int, len(n.qps)), posted: make([]int, len(n.qps))}
}

// pump posts what the windows allow.
func (r *bwRunner) pump() {
	now := time.Now()
	if r.start.IsZero() {
		r.start, r.lastT = now, now
		if r.dur > 0 {
			r.stopAt = now.Add(r.dur)
		}
	}
	if now.Sub(r.lastT) >= 50*time.Millisecond {
		rate := float64(r.completed-r.lastDone) * float64(r.size) / now.Sub(r.lastT).Seconds()
		r.peak = max(r.peak, rate)
		r.lastT, r.lastDone = now, r.completed
	}
	if r.stopped || (r.dur > 0 && now.After(r.stopAt)) {
		return
	}
	t := r.n.be.Now()
	for q, p := range r.n.qps {
		for r.outstanding[q] < r.depth && (r.dur > 0 || r.posted[q] < r.iters) {
			off := q * r.slot
			if r.verify {
				off += r.posted[q] % r.depth * r.stride
				if r.op != verbs.WRRead {
					fillPattern(r.n.mem.buf[off:off+r.size], q, r.posted[q])
				}
			}
			wr := verbs.SendWR{ID: uint64(q)<<32 | uint64(r.posted[q]), Opcode: r.op, Local: r.n.mem.sge(off, r.size)}
			if r.op != verbs.WRSend {
				wr.RemoteAddr, wr.RKey = r.remote.Addr+uint64(off), verbs.RKey(r.remote.RKey)
			}
			if err := p.PostSend(t, wr); err != nil {
				r.err = fmt.Errorf("post: %w", err)
				return
			}
			r.outstanding[q]++
			r.posted[q]++
		}
	}
}

// wrFailure is a work request that completed in error: a result of the
// run (RoCEv2 out of retries under loss, say), not a fault of the tool.
type wrFailure struct{ status verbs.Status }

func (e *wrFailure) Error() string { return fmt.Sprintf("work request failed: %v", e.status) }

// onWC takes one of the runner's send-side completions.
func (r *bwRunner) onWC(wc verbs.WorkCompletion) {
	q := int(wc.WRID >> 32)
	if q >= len(r.outstanding) {
		return
	}
	if wc.Status != verbs.StatusSuccess && r.err == nil {
		r.err = &wrFailure{status: wc.Status}
	}
	if r.verify && r.op == verbs.WRRead && wc.Status == verbs.StatusSuccess && r.err == nil {
		i := int(uint32(wc.WRID))
		j := i % r.depth
		off := q*r.slot + j*r.stride
		r.err = checkPattern(r.n.mem.buf[off:off+r.size], q, i, j)
	}
	r.outstanding[q]--
	r.completed++
	if r.finished() && r.end.IsZero() {
		r.end = time.Now()
	}
}

// finished: everything posted has completed and nothing more will be.
func (r *bwRunner) finished() bool {
	for q := range r.outstanding {
		if r.outstanding[q] > 0 {
			return false
		}
		if !r.stopped && r.dur == 0 && r.posted[q] < r.iters {
			return false
		}
	}
	return r.stopped || r.dur == 0 || !r.start.IsZero() && time.Now().After(r.stopAt)
}

// result is what completed, per perftest's definitions: BW average is
// bytes completed over the time from the first post to the last
// completion; BW peak is the best 50 ms interval (the average when the run
// was shorter); MsgRate is messages per second.
func (r *bwRunner) result() perfResult {
	end := r.end
	if end.IsZero() {
		end = time.Now()
	}
	sec := end.Sub(r.start).Seconds()
	res := perfResult{Size: r.size, Iters: r.completed, Seconds: sec}
	if sec > 0 && r.completed > 0 {
		res.BWAvg = float64(r.completed) * float64(r.size) / sec
		res.MsgRate = float64(r.completed) / sec
	}
	res.BWPeak = max(r.peak, res.BWAvg)
	return res
}
