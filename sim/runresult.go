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

func (r *runResult) add(k string, v any) { r.row = append(r.row, Field{k, v}) }

func (r *runResult) addSeries(k string, v []float64) { r.series = append(r.series, Field{k, v}) }

// result gathers the run's figures: the workload's own, then the
// fabric's, then the transport's counters.
func (s *Sim) result() *runResult {
	r := &runResult{}
	s.wl.report(s, r)
	f := s.fabricStats()
	r.add("base_rtt_us", float64(s.baseRTT)/1e3)
	r.add("peak_queue_kib", float64(f.peakQueue)/1024)
	r.add("buffer_drops", f.bufferDrops)
	r.add("loss_drops", f.lossDrops)
	r.add("failure_drops", f.downDrops+s.noRoute)
	r.add("ce_marks", f.ceMarks)
	if s.pfc.on {
		ps := s.pfcStats()
		r.add("pfc_pauses", ps.pauses)
		r.add("pfc_paused_links", ps.pausedLinks)
		r.add("pfc_paused_us", float64(ps.pausedNs)/1e3)
		r.add("pfc_max_paused_us", float64(ps.maxPausedNs)/1e3)
		r.add("pfc_overflow_drops", ps.overflowDrops)
	}
	r.add("failed_wrs", s.failedWRs)
	r.add("packets", s.hostTx)
	r.add("sim_time_us", float64(s.now)/1e3)
	if s.cfg.Workload.Kind == "allreduce" || s.cfg.Workload.Kind == "all-to-all" || s.cfg.Workload.FlowSize > 0 {
		r.add("finished", s.finishAt != verbs.Never)
	}
	r.row = append(r.row, s.world.Counters()...)
	return r
}
