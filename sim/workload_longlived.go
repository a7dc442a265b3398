package sim

import (
	"github.com/metaroce/metaroce/verbs"
)

// longLived is write_bw-style traffic: every connection keeps Outstanding
// messages of MessageSize posted, for the whole run (or until it has moved
// FlowSize bytes). Connections go from host 0 to host 1 (pattern pair) or
// from each host i to host i+H/2 mod H (pattern permutation), spread round
// robin over the pairs.
type longLived struct {
	cfg   *WorkloadConfig
	flows []flow
	m     meter
	left  int // flows with a target still running
	// snap holds every connection's delivered bytes halfway between the
	// first failure and the end, to find connections that stalled.
	snap []uint64
}

func (w *longLived) maxMessage() int { return int(w.cfg.MessageSize) }

func (w *longLived) setup(s *Sim) error {
	h := len(s.hosts)
	for i := 0; i < w.cfg.Connections; i++ {
		src, dst := 0, 1
		if w.cfg.Pattern == "permutation" {
			src = i % h
			dst = (src + h/2) % h
			if dst == src {
				dst = (src + 1) % h
			}
		}
		ref, err := s.world.Dial(s.now, src, dst)
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

func (w *longLived) begin(s *Sim) {
	for i := range w.flows {
		f := &w.flows[i]
		f.start = s.now
		for k := 0; k < w.cfg.Outstanding; k++ {
			w.next(s, f)
		}
	}
}

// next posts f's next message, if it has one left.
func (w *longLived) next(s *Sim, f *flow) {
	n := int64(w.cfg.MessageSize)
	if f.target > 0 {
		n = min(n, f.target-f.posted)
		if n <= 0 {
			return
		}
	}
	f.posted += n
	f.inflight++
	s.post(f.ref, f.src, int(n), 0)
}

func (w *longLived) completion(s *Sim, c Completion) {
	f := &w.flows[c.Conn]
	if c.Recv {
		f.arrived += int64(c.Bytes)
		if f.target > 0 && f.arrived >= f.target && f.done == verbs.Never {
			f.done = s.now
			w.left--
		}
		return
	}
	f.inflight--
	w.next(s, f)
}

func (w *longLived) sample(s *Sim) {
	w.m.sample(s)
	if w.snap == nil && len(s.cfg.Failures) > 0 {
		at := s.cfg.Failures[0].At.T()
		if s.now >= at+(s.end-at)/2 {
			w.snap = make([]uint64, len(w.flows))
			for i := range w.flows {
				w.snap[i] = s.world.Delivered(w.flows[i].ref)
			}
		}
	}
}

func (w *longLived) finished() bool { return w.cfg.FlowSize > 0 && w.left == 0 }

func (w *longLived) report(s *Sim, r *runResult) {
	w.m.sample(s)
	senders := 1
	if w.cfg.Pattern == "permutation" {
		senders = len(s.hosts)
	}
	capGbps := capacityGbps(s.cfg, senders)
	from := s.cfg.Warmup.T()
	goodput := w.m.avg(from, s.now)
	r.add("goodput_gbps", goodput)
	r.add("link_gbps", capGbps)
	r.add("efficiency", goodput/capGbps)
	r.add("connections", len(w.flows))
	if len(s.cfg.Failures) > 0 {
		failureFigures(s, r, &w.m)
		// Stalled: delivered nothing in the second half of the time after
		// the failure (the application would notice these).
		var stalled any
		if w.snap != nil {
			n := 0
			for i := range w.flows {
				if s.world.Delivered(w.flows[i].ref) == w.snap[i] && (w.flows[i].target == 0 || w.flows[i].done == verbs.Never) {
					n++
				}
			}
			stalled = n
		}
		r.add("stalled_connections", stalled)
	}
	fctFigures(r, w.flows)
	t, g := w.m.series()
	r.addSeries("t_us", t)
	r.addSeries("goodput_gbps", g)
}

// failureFigures reports throughput before and after the first failure
// and how long the transport took to recover, in base RTTs: from the
// failure until goodput, averaged over windows of about 4 base RTTs, is at
// least 90% of what the surviving NIC capacity allows (the goodput before
// the failure times the share of host ports still up) in every window
// from then on. null when it never is.
func failureFigures(s *Sim, r *runResult, m *meter) {
	f := s.cfg.Failures[0]
	at := f.At.T()
	end := s.now
	if !f.Recover.Never() && f.Recover.T() < end {
		end = f.Recover.T()
	}
	before := m.avg(s.cfg.Warmup.T(), at)
	after := m.avg(at+(end-at)/2, end)
	up, all := 0, 0
	for h := range s.topo.hostPorts {
		for _, li := range s.topo.hostPorts[h] {
			all++
			if !s.links[li].down {
				up++
			}
		}
	}
	expected := before * float64(up) / float64(all)
	k := settleBins(s)
	var recover any
	if i := m.settledFrom(at, end, k, func(j int) bool { return m.windowRate(j, k) >= 0.9*expected }); i >= 0 {
		recover = float64(m.binStart(i)-at) / float64(s.baseRTT)
	}
	r.add("before_gbps", before)
	r.add("after_gbps", after)
	r.add("expected_after_gbps", expected)
	r.add("recover_rtts", recover)
	// The criterion: back to 70% of the rate before the failure.
	var recover70 any
	if i := m.settledFrom(at, end, k, func(j int) bool { return m.windowRate(j, k) >= 0.7*before }); i >= 0 {
		recover70 = float64(m.binStart(i)-at) / float64(s.baseRTT)
	}
	r.add("recover70_rtts", recover70)
	// When the plane (or link) comes back: the rate over the second half
	// of the time after its return, which the transport reaches only by
	// re-probing its failed paths and using them again.
	if rt := f.Recover.T(); !f.Recover.Never() && rt < s.now {
		r.add("recovered_gbps", m.avg(rt+(s.now-rt)/2, s.now))
	}
}
