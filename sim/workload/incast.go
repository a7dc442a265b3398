package workload

import (
	"github.com/metaroce/metaroce/verbs"
)

// incast is N:1: hosts 1..N each open one connection to host 0 and keep
// Outstanding messages posted (until FlowSize bytes, if set). Its figures
// are the receiver's goodput and Jain's fairness among the senders over
// time, the peak queue, and the time to converge.
type incast struct {
	cfg   *Config
	sp    *Spec
	flows []flow
	m     meter
	left  int
	start verbs.Time
	qpeak []float64 // per bin: the peak queue on the receiver's ports (its leaves' links to it), bytes
}

func (w *incast) MaxMessage() int { return int(w.cfg.MessageSize) }

func (w *incast) Setup(s Env) error {
	w.m.keep = true
	for i := 1; i <= w.cfg.Senders; i++ {
		ref, err := s.Dial(i, 0)
		if err != nil {
			return err
		}
		w.flows = append(w.flows, flow{ref: ref, src: i, dst: 0, target: int64(w.cfg.FlowSize), done: verbs.Never})
		w.m.track(ref, i-1)
		if w.cfg.FlowSize > 0 {
			w.left++
		}
	}
	return nil
}

func (w *incast) Begin(s Env) {
	w.start = s.Now()
	ll := longLived{cfg: w.cfg, sp: w.sp}
	for i := range w.flows {
		f := &w.flows[i]
		f.start = s.Now()
		for k := 0; k < w.cfg.Outstanding; k++ {
			ll.next(s, f)
		}
	}
}

func (w *incast) OnCompletion(s Env, c Completion) {
	f := &w.flows[c.Conn]
	if c.Recv {
		if f.arrive(int64(c.Bytes), s.Now()) {
			w.left--
		}
		return
	}
	f.inflight--
	ll := longLived{cfg: w.cfg, sp: w.sp}
	ll.next(s, f)
}

func (w *incast) Sample(s Env) {
	n := len(w.m.t)
	w.m.sample(s, w.sp)
	if len(w.m.t) == n {
		return
	}
	w.qpeak = append(w.qpeak, float64(s.TakeBinPeak(0)))
}

func (w *incast) Finished() bool { return w.cfg.FlowSize > 0 && w.left == 0 }

// fairnessBins is how many bins Jain's index is computed over: enough
// that each sender's fair share is at least 8 full packets, so that the
// index measures the transport and not the granularity of packets.
func (w *incast) fairnessBins(s Env, capGbps float64) int {
	need := float64(8*w.cfg.Senders*w.sp.MTU*8) / capGbps // ns
	k := int(need/float64(w.sp.Bin)) + 1
	return max(1, k)
}

func (w *incast) Report(s Env, r Figures) {
	w.m.sample(s, w.sp)
	capGbps := capacityGbps(w.sp, 1)
	goodput := w.m.avg(w.sp.Warmup, s.Now())
	r.Add("goodput_gbps", goodput)
	r.Add("link_gbps", capGbps)
	r.Add("efficiency", goodput/capGbps)
	r.Add("senders", w.cfg.Senders)
	// Fairness over the steady window, from each sender's total.
	tot := make([]float64, w.m.groups)
	for i := range w.m.t {
		if w.m.binStart(i) >= w.sp.Warmup {
			for g, b := range w.m.per[i] {
				tot[g] += b
			}
		}
	}
	r.Add("jain", jain(tot))
	// Jain over time, on a sliding window of k bins.
	k := w.fairnessBins(s, capGbps)
	js := make([]float64, len(w.m.t))
	win := make([]float64, w.m.groups)
	for i := range w.m.t {
		for g, b := range w.m.per[i] {
			win[g] += b
		}
		if i >= k {
			for g, b := range w.m.per[i-k] {
				win[g] -= b
			}
		}
		js[i] = jain(win)
	}
	// Converged: from some bin on, goodput (over the windows below) is
	// at least 90% of the receiver's link and the fairness index at least
	// 0.95, for the rest of the run.
	var conv any
	// Goodput is judged over the same windows as fairness: at least
	// ~10 base RTTs, and long enough for every sender's fair share to be
	// 8 packets (shorter windows measure packet granularity and the
	// pacing jitter, not the transport).
	ks := max(int((10*s.BaseRTT()+w.sp.Bin-1)/w.sp.Bin), k)
	if i := w.m.settledFrom(w.start, s.Now(), ks, func(j int) bool {
		return w.m.windowRate(j, ks) >= 0.9*capGbps && js[j] >= 0.95
	}); i >= 0 {
		conv = float64(w.m.binStart(i)-w.start) / float64(s.BaseRTT())
	}
	r.Add("converge_rtts", conv)
	// The criteria: fairness from the third base RTT after the
	// burst starts (each sender's bytes from then to the end), and the
	// peak queue at the receiver's port once converged, against one BDP
	// of the receiver's link.
	from3 := w.start + 3*s.BaseRTT()
	tot3 := make([]float64, w.m.groups)
	for i := range w.m.t {
		if w.m.binStart(i) >= from3 {
			for g, b := range w.m.per[i] {
				tot3[g] += b
			}
		}
	}
	r.Add("jain_from3", jain(tot3))
	r.Add("goodput_from3_gbps", w.m.avg(from3, s.Now()))
	var qAfter any
	if c, ok := conv.(float64); ok {
		// Convergence is judged from the third base RTT (the issue's
		// yardstick): before that no sender can have heard from the
		// receiver, and the queue holds the senders' first packets.
		from := max(w.start+verbs.Time(c*float64(s.BaseRTT())), from3)
		var q float64
		for i := range w.qpeak {
			if i < len(w.m.t) && w.m.binStart(i) >= from {
				q = max(q, w.qpeak[i])
			}
		}
		qAfter = q / 1024
	}
	r.Add("queue_after_kib", qAfter)
	// The steady state: the peak queue after the warmup.
	var qs float64
	for i := range w.qpeak {
		if i < len(w.m.t) && w.m.binStart(i) >= w.sp.Warmup {
			qs = max(qs, w.qpeak[i])
		}
	}
	r.Add("queue_steady_kib", qs/1024)
	r.Add("bdp_kib", capGbps*float64(s.BaseRTT())/8/1024)
	r.Add("fairness_window_us", float64(k)*float64(w.sp.Bin)/1e3)
	fctFigures(r, w.flows)
	t, g := w.m.series()
	r.AddSeries("t_us", t)
	r.AddSeries("goodput_gbps", g)
	r.AddSeries("jain", js)
	qk := make([]float64, len(w.m.t))
	for i := range qk {
		if i < len(w.qpeak) {
			qk[i] = w.qpeak[i] / 1024
		}
	}
	r.AddSeries("queue_kib", qk)
}
