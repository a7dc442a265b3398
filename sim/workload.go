package sim

import (
	"fmt"

	"github.com/metaroce/metaroce/verbs"
)

// workload is the application running on the hosts: it opens connections,
// posts messages and reacts to completions, and it turns what it saw into
// the run's figures. Its calls come from the run's goroutine; it posts
// through the Sim (s.post), never into a transport directly.
type workload interface {
	// maxMessage is the largest message it will post.
	maxMessage() int
	// setup opens the connections, at time 0.
	setup(s *Sim) error
	// begin posts the first messages, at workload.start.
	begin(s *Sim)
	// completion handles one completion.
	completion(s *Sim, c Completion)
	// sample is called every bin.
	sample(s *Sim)
	// finished reports whether a finite workload is done.
	finished() bool
	// report adds the workload's figures to the result.
	report(s *Sim, r *runResult)
}

func newWorkload(c *Config, hosts int) (workload, error) {
	w := &c.Workload
	switch w.Kind {
	case "long-lived":
		if hosts < 2 {
			return nil, fmt.Errorf("workload long-lived needs at least 2 hosts")
		}
		return &longLived{cfg: w}, nil
	case "incast":
		if w.Senders < 1 || w.Senders >= hosts {
			return nil, fmt.Errorf("workload.senders = %d, want 1..%d (hosts - 1)", w.Senders, hosts-1)
		}
		return &incast{cfg: w}, nil
	case "all-to-all", "allreduce":
		n := w.Hosts
		if n == 0 {
			n = hosts
		}
		if n < 2 || n > hosts {
			return nil, fmt.Errorf("workload.hosts = %d, want 2..%d", w.Hosts, hosts)
		}
		if w.Size < Size(n*w.Channels) { // channels >= 1 (checked with the defaults)
			return nil, fmt.Errorf("workload.size = %v, want at least one byte per rank and channel (%d)", w.Size, n*w.Channels)
		}
		return &collective{cfg: w, ranks: n, kind: w.Kind, channels: w.Channels}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", w.Kind)
}

// post sends a message from the workload and marks the host for a kick.
// Its operation comes from workload.ops: the k-th message on connection c
// uses ops[(c+k) mod len(ops)], so that every connection, even one that
// posts a single message, sees the mix.
func (s *Sim) post(c ConnRef, src int, n int, id uint32) {
	op := s.ops[0]
	if len(s.ops) > 1 {
		for int(c) >= len(s.opNext) {
			s.opNext = append(s.opNext, 0)
		}
		op = s.ops[(int(c)+int(s.opNext[c]))%len(s.ops)]
		s.opNext[c]++
	}
	if err := s.world.Post(s.now, c, op, n, id); err != nil {
		s.postErrors++
		return
	}
	s.posted(src)
}

// flow is one connection's traffic and its bookkeeping.
type flow struct {
	ref      ConnRef
	src, dst int
	target   int64 // bytes to move; 0 = forever
	posted   int64
	arrived  int64
	inflight int
	start    verbs.Time
	done     verbs.Time // Never until all target bytes arrived
}

// meter samples what connections have delivered, every bin: the
// aggregate, and per group when the workload wants fairness.
type meter struct {
	refs   []ConnRef
	group  []int32
	groups int
	keep   bool
	last   []uint64
	t      []verbs.Time // end of each bin
	total  []float64    // bytes delivered in each bin
	per    [][]float64  // [bin][group] bytes, when keep
}

func (m *meter) track(ref ConnRef, group int) {
	m.refs = append(m.refs, ref)
	m.group = append(m.group, int32(group))
	m.last = append(m.last, 0)
	m.groups = max(m.groups, group+1)
}

func (m *meter) sample(s *Sim) {
	if n := len(m.t); n > 0 && m.t[n-1] >= s.now {
		return
	}
	if m.t == nil {
		// Every bin's slot up front: sampling allocates nothing after.
		bins := int(s.end/s.cfg.Bin.T()) + 2
		m.t = make([]verbs.Time, 0, bins)
		m.total = make([]float64, 0, bins)
	}
	var tot uint64
	var row []float64
	if m.keep {
		row = make([]float64, m.groups)
	}
	for i, r := range m.refs {
		d := s.world.Delivered(r)
		delta := d - m.last[i]
		m.last[i] = d
		tot += delta
		if m.keep {
			row[m.group[i]] += float64(delta)
		}
	}
	m.t = append(m.t, s.now)
	m.total = append(m.total, float64(tot))
	if m.keep {
		m.per = append(m.per, row)
	}
}

// binStart is the start of bin i.
func (m *meter) binStart(i int) verbs.Time {
	if i == 0 {
		return 0
	}
	return m.t[i-1]
}

// rate returns the goodput of bin i in Gb/s.
func (m *meter) rate(i int) float64 {
	d := m.t[i] - m.binStart(i)
	if d <= 0 {
		return 0
	}
	return m.total[i] * 8 / float64(d)
}

// windowRate is the goodput in Gb/s over bins j-k+1..j (fewer at the
// start).
func (m *meter) windowRate(j, k int) float64 {
	i := max(0, j-k+1)
	var b float64
	for x := i; x <= j; x++ {
		b += m.total[x]
	}
	d := m.t[j] - m.binStart(i)
	if d <= 0 {
		return 0
	}
	return b * 8 / float64(d)
}

// settleBins is the window over which "from then on" criteria
// (convergence, recovery) judge goodput: about 4 base RTTs, so that a
// single bin's packet granularity does not decide them.
func settleBins(s *Sim) int {
	return max(1, int((4*s.baseRTT+s.cfg.Bin.T()-1)/s.cfg.Bin.T()))
}

// settledFrom returns the first bin i starting at or after from such that
// every window of k bins lying after bin i's start, up to the bin ending
// at to, satisfies ok(j) (j the window's last bin); -1 if there is none.
func (m *meter) settledFrom(from, to Time, k int, ok func(j int) bool) int {
	last := -1
	for j := range m.t {
		if m.t[j] <= to {
			last = j
		}
	}
	// Scan backwards: good[i] holds when every window ending at j >= i+k-1
	// (and <= last) is ok.
	first := -1
	allOK := true
	for i := last; i >= 0; i-- {
		if m.binStart(i) < from {
			break
		}
		if j := i + k - 1; j <= last && !ok(j) {
			allOK = false
		}
		if j := i + k - 1; j > last && !ok(last) {
			allOK = false
		}
		if !allOK {
			break
		}
		first = i
	}
	return first
}

// avg is the goodput in Gb/s over the bins that lie within [from, to].
func (m *meter) avg(from, to verbs.Time) float64 {
	var b float64
	var t0, t1 verbs.Time = -1, 0
	for i := range m.t {
		if m.binStart(i) < from || m.t[i] > to {
			continue
		}
		if t0 < 0 {
			t0 = m.binStart(i)
		}
		t1 = m.t[i]
		b += m.total[i]
	}
	if t0 < 0 || t1 <= t0 {
		return 0
	}
	return b * 8 / float64(t1-t0)
}

// series returns the time axis (µs, bin ends) and the goodput per bin.
func (m *meter) series() (tus, gbps []float64) {
	for i := range m.t {
		tus = append(tus, float64(m.t[i])/1e3)
		gbps = append(gbps, m.rate(i))
	}
	return tus, gbps
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are
// equal, 1/n when one has everything. All zero counts as fair (1).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// capacityGbps is the NIC capacity of n hosts: planes × nic rate each.
func capacityGbps(c *Config, n int) float64 {
	return float64(n*c.Topology.Planes) * c.Topology.NICGbps
}

// fctFigures adds completion-time percentiles of finished flows.
func fctFigures(r *runResult, flows []flow) {
	var fcts []float64
	unfinished := 0
	for i := range flows {
		if flows[i].target == 0 {
			continue
		}
		if flows[i].done == verbs.Never {
			unfinished++
			continue
		}
		fcts = append(fcts, float64(flows[i].done-flows[i].start)/1e3)
	}
	if len(fcts) == 0 && unfinished == 0 {
		return
	}
	r.add("fct_p50_us", percentile(fcts, 50))
	r.add("fct_p99_us", percentile(fcts, 99))
	r.add("fct_max_us", percentile(fcts, 100))
	r.add("unfinished_flows", unfinished)
}
