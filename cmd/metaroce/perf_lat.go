package main

import (
	"math"
	"slices"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// latRunner runs a latency test's client side, one message at a time on
// QP 0, as perftest does (TX depth 1):
//
//   - send_lat: SEND, and the server SENDs the same size back; the sample
//     is half the round trip.
//   - write_lat: WRITE_IMM, and the server WRITE_IMMs back; the sample is
//     half the round trip. (perftest polls the last byte of the buffer; a
//     metaroce WRITE may land out of order, so the immediate's receive
//     completion is the one sound "it has all arrived" signal.)
//   - read_lat: READ; the sample is the whole round trip.
type latRunner struct {
	n      *node
	test   string
	size   int
	iters  int
	dur    time.Duration
	remote regionInfo

	start, stopAt time.Time
	posted        time.Time
	waiting       bool
	samples       []float64 // microseconds
	stopped       bool
	err           error
	seq           uint64
}

func newLatRunner(n *node, test string, size, iters int, dur time.Duration, remote regionInfo) *latRunner {
	return &latRunner{n: n, test: test, size: size, iters: iters, dur: dur, remote: remote,
		samples: make([]float64, 0, max(iters, 1024))}
}

func (r *latRunner) pump() {
	now := time.Now()
	if r.start.IsZero() {
		r.start = now
		if r.dur > 0 {
			r.stopAt = now.Add(r.dur)
		}
	}
	if r.waiting || r.stopped || r.done() {
		return
	}
	t := r.n.be.Now()
	q := r.n.qps[0]
	r.seq++
	var wr verbs.SendWR
	switch r.test {
	case "send_lat":
		wr = verbs.SendWR{Opcode: verbs.WRSend, Local: r.n.mem.sge(0, r.size)}
	case "write_lat":
		wr = verbs.SendWR{Opcode: verbs.WRWriteImm, Local: r.n.mem.sge(0, r.size), RemoteAddr: r.remote.Addr,
			RKey: verbs.RKey(r.remote.RKey), Imm: uint32(r.size)}
	default:
		wr = verbs.SendWR{Opcode: verbs.WRRead, Local: r.n.mem.sge(0, r.size), RemoteAddr: r.remote.Addr, RKey: verbs.RKey(r.remote.RKey)}
	}
	if r.test != "read_lat" {
		if err := q.PostRecv(t, verbs.RecvWR{ID: r.seq, Local: r.n.mem.sge(0, r.n.recvLen())}); err != nil {
			r.err = err
			return
		}
	}
	wr.ID = r.seq
	r.posted = time.Now()
	if err := q.PostSend(t, wr); err != nil {
		r.err = err
		return
	}
	r.waiting = true
}

func (r *latRunner) onWC(wc verbs.WorkCompletion) {
	if wc.Status != verbs.StatusSuccess && r.err == nil {
		r.err = &wrFailure{status: wc.Status}
		return
	}
	var pong bool
	switch r.test {
	case "send_lat":
		pong = wc.Opcode == verbs.WCRecv
	case "write_lat":
		pong = wc.Opcode == verbs.WCRecvWriteImm
	default:
		pong = wc.Opcode == verbs.WCRead
	}
	if !pong || !r.waiting {
		return
	}
	us := float64(time.Since(r.posted).Nanoseconds()) / 1e3
	if r.test != "read_lat" {
		us /= 2
	}
	r.samples = append(r.samples, us)
	r.waiting = false
}

func (r *latRunner) done() bool {
	if r.waiting {
		return false
	}
	if r.stopped {
		return true
	}
	if r.dur > 0 {
		return !r.start.IsZero() && time.Now().After(r.stopAt)
	}
	return len(r.samples) >= r.iters
}

func (r *latRunner) finished() bool { return r.done() }

func (r *latRunner) result() perfResult {
	res := perfResult{Size: r.size, Iters: len(r.samples), Seconds: time.Since(r.start).Seconds()}
	s := slices.Clone(r.samples)
	if len(s) == 0 {
		return res
	}
	slices.Sort(s)
	var sum, sq float64
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(len(s))
	for _, v := range s {
		sq += (v - avg) * (v - avg)
	}
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	res.Lat = &latStats{Min: s[0], Max: s[len(s)-1], Typical: s[len(s)/2], Avg: avg,
		Stdev: math.Sqrt(sq / float64(len(s))), P99: pct(0.99), P999: pct(0.999)}
	return res
}

// runner is a bw or latency runner.
type runner interface {
	pump()
	onWC(wc verbs.WorkCompletion)
	finished() bool
	result() perfResult
	stop()
	failure() error
}

func (r *bwRunner) stop()           { r.stopped = true }
func (r *bwRunner) failure() error  { return r.err }
func (r *latRunner) stop()          { r.stopped = true }
func (r *latRunner) failure() error { return r.err }
