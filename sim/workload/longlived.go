package workload

import (
	"github.com/metaroce/metaroce/verbs"
)

// longLived is write_bw-style traffic: every connection keeps Outstanding
// messages of MessageSize posted, for the whole run (or until it has moved
// FlowSize bytes). Connections go from host 0 to host 1 (pattern pair) or
// from each host i to host i+H/2 mod H (pattern permutation), spread round
// robin over the pairs.
type longLived struct {
	cfg   *Config
	sp    *Spec
	flows []flow
	m     meter
	left  int // flows with a target still running
	// snap holds every connection's delivered bytes halfway between the
	// first failure and the end, to find connections that stalled.
	snap []uint64
}

func (w *longLived) MaxMessage() int { return int(w.cfg.MessageSize) }

func (w *longLived) Setup(s Env) error {
	h := w.sp.Hosts
	for i := 0; i < w.cfg.Connections; i++ {
		src, dst := 0, 1
		if w.cfg.Pattern == "permutation" {
			src = i % h
			dst = (src + h/2) % h
			if dst == src {
				dst = (src + 1) % h
			}
		}
		ref, err := s.Dial(src, dst)
		if err != nil {
			return err
		}
		w.flows = append(w.flows, flow{ref: ref, src: src, dst: dst, target: int64(w.cfg.FlowSize), done: verbs.Never})
		w.m.track(ref, i)
		if w.cfg.FlowSize > 0 {
			w.left++
		}
	}
	return nil
}

func (w *longLived) Begin(s Env) {
	for i := range w.flows {
		f := &w.flows[i]
		f.start = s.Now()
		for k := 0; k < w.cfg.Outstanding; k++ {
			w.next(s, f)
		}
	}
}

// next posts f's next message, if it has one left.
func (w *longLived) next(s Env, f *flow) {
	n := int64(w.cfg.MessageSize)
	if f.target > 0 {
		n = min(n, f.target-f.posted)
		if n <= 0 {
			return
		}
	}
	f.posted += n
	f.inflight++
	s.Post(f.ref, f.src, int(n), 0)
}

func (w *longLived) OnCompletion(s Env, c Completion) {
	f := &w.flows[c.Conn]
	if c.Recv {
		if f.arrive(int64(c.Bytes), s.Now()) {
			w.left--
		}
		return
	}
	f.inflight--
	w.next(s, f)
}

func (w *longLived) Sample(s Env) {
	w.m.sample(s, w.sp)
	if w.snap == nil && len(w.sp.Failures) > 0 {
		at := w.sp.Failures[0].At.T()
		if s.Now() >= at+(w.sp.End-at)/2 {
			w.snap = make([]uint64, len(w.flows))
			for i := range w.flows {
				w.snap[i] = s.Delivered(w.flows[i].ref)
			}
		}
	}
}

func (w *longLived) Finished() bool { return w.cfg.FlowSize > 0 && w.left == 0 }

func (w *longLived) Report(s Env, r Figures) {
	w.m.sample(s, w.sp)
	senders := 1
	if w.cfg.Pattern == "permutation" {
		senders = w.sp.Hosts
	}
	capGbps := capacityGbps(w.sp, senders)
	from := w.sp.Warmup
	goodput := w.m.avg(from, s.Now())
	r.Add("goodput_gbps", goodput)
	r.Add("link_gbps", capGbps)
	r.Add("efficiency", goodput/capGbps)
	r.Add("connections", len(w.flows))
	if len(w.sp.Failures) > 0 {
		failureFigures(s, w.sp, r, &w.m)
		// Stalled: delivered nothing in the second half of the time after
		// the failure (the application would notice these).
		var stalled any
		if w.snap != nil {
			n := 0
			for i := range w.flows {
				if s.Delivered(w.flows[i].ref) == w.snap[i] && (w.flows[i].target == 0 || w.flows[i].done == verbs.Never) {
					n++
				}
			}
			stalled = n
		}
		r.Add("stalled_connections", stalled)
	}
	fctFigures(r, w.flows)
	t, g := w.m.series()
	r.AddSeries("t_us", t)
	r.AddSeries("goodput_gbps", g)
}

// failureFigures reports throughput before and after the first failure
// and how long the transport took to recover, in base RTTs: from the
// failure until goodput, averaged over windows of about 4 base RTTs, is at
// least 90% of what the surviving NIC capacity allows (the goodput before
// the failure times the share of host ports still up) in every window
// from then on. null when it never is.
func failureFigures(s Env, sp *Spec, r Figures, m *meter) {
	f := sp.Failures[0]
	at := f.At.T()
	end := s.Now()
	if !f.Recover.Never() && f.Recover.T() < end {
		end = f.Recover.T()
	}
	before := m.avg(sp.Warmup, at)
	after := m.avg(at+(end-at)/2, end)
	up, all := s.HostPortsUp()
	expected := before * float64(up) / float64(all)
	k := settleBins(s, sp)
	var recover any
	if i := m.settledFrom(at, end, k, func(j int) bool { return m.windowRate(j, k) >= 0.9*expected }); i >= 0 {
		recover = float64(m.binStart(i)-at) / float64(s.BaseRTT())
	}
	r.Add("before_gbps", before)
	r.Add("after_gbps", after)
	r.Add("expected_after_gbps", expected)
	r.Add("recover_rtts", recover)
	// The criterion: back to 70% of the rate before the failure.
	var recover70 any
	if i := m.settledFrom(at, end, k, func(j int) bool { return m.windowRate(j, k) >= 0.7*before }); i >= 0 {
		recover70 = float64(m.binStart(i)-at) / float64(s.BaseRTT())
	}
	r.Add("recover70_rtts", recover70)
	// When the plane (or link) comes back: the rate over the second half
	// of the time after its return, which the transport reaches only by
	// re-probing its failed paths and using them again.
	if rt := f.Recover.T(); !f.Recover.Never() && rt < s.Now() {
		r.Add("recovered_gbps", m.avg(rt+(s.Now()-rt)/2, s.Now()))
	}
}
