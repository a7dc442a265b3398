package sim

import (
	"github.com/metaroce/metaroce/verbs"
)

// runResult is what one run measured: its figures in order, and its time
// series (t_us first, then one or more named series on the same axis).
type runResult struct {
	row    Row
	series Row // name → []float64
}

// Add appends a figure (workload.Figures).
func (r *runResult) Add(k string, v any) { r.row = append(r.row, Field{k, v}) }

// AddSeries appends a time series (workload.Figures).
func (r *runResult) AddSeries(k string, v []float64) { r.series = append(r.series, Field{k, v}) }

// result gathers the run's figures: the workload's own, then the
// fabric's, then the transport's counters.
func (s *Sim) result() *runResult {
	r := &runResult{}
	s.wl.Report(s, r)
	f := s.fab.Stats()
	r.Add("base_rtt_us", float64(s.baseRTT)/1e3)
	r.Add("peak_queue_kib", float64(f.PeakQueue)/1024)
	r.Add("buffer_drops", f.BufferDrops)
	r.Add("loss_drops", f.LossDrops)
	r.Add("failure_drops", f.DownDrops+f.NoRoute)
	r.Add("ce_marks", f.CEMarks)
	if ps, ok := s.fab.PFCStats(); ok {
		r.Add("pfc_pauses", ps.Pauses)
		r.Add("pfc_paused_links", ps.PausedLinks)
		r.Add("pfc_paused_us", float64(ps.PausedNs)/1e3)
		r.Add("pfc_max_paused_us", float64(ps.MaxPausedNs)/1e3)
		r.Add("pfc_overflow_drops", ps.OverflowDrops)
	}
	r.Add("failed_wrs", s.failedWRs)
	r.Add("packets", f.HostTx)
	r.Add("sim_time_us", float64(s.Now())/1e3)
	if s.cfg.Workload.Kind == "allreduce" || s.cfg.Workload.Kind == "all-to-all" || s.cfg.Workload.FlowSize > 0 {
		r.Add("finished", s.finishAt != verbs.Never)
	}
	r.row = append(r.row, s.world.Counters()...)
	return r
}
