// Package workload is the applications the simulator runs on its hosts:
// long-lived streams, incast, and the collectives. A workload opens
// connections, posts messages and reacts to completions through Env, the
// run as its application sees it (never a transport or the fabric
// directly), and it turns what it saw into the run's figures.
package workload

import (
	"fmt"
	"github.com/metaroce/metaroce/verbs"

	"github.com/metaroce/metaroce/sim/units"
)

// Workload is the application running on the hosts. Its calls come from
// the run's goroutine, in event order.
type Workload interface {
	// MaxMessage is the largest message it will post.
	MaxMessage() int
	// Setup opens the connections, at time 0.
	Setup(s Env) error
	// Begin posts the first messages, at workload.start.
	Begin(s Env)
	// OnCompletion handles one completion.
	OnCompletion(s Env, c Completion)
	// Sample is called every bin.
	Sample(s Env)
	// Finished reports whether a finite workload is done.
	Finished() bool
	// Report adds the workload's figures to the result.
	Report(s Env, r Figures)
}

// Env is the run as a workload sees it.
type Env interface {
	// Now is the run's virtual time.
	Now() verbs.Time
	// Dial opens a connection from host src to host dst (see
	// sim.World.Dial).
	Dial(src, dst int) (ConnRef, error)
	// Post sends a message of n bytes from host src on c; id comes back in
	// its completions. The run picks its operation (workload.ops) and
	// counts a post the transport refuses.
	Post(c ConnRef, src, n int, id uint32)
	// Delivered is the payload placed so far by c's messages.
	Delivered(c ConnRef) uint64
	// BaseRTT is the round trip of a data packet and its ACK over the
	// idle fabric's longest route.
	BaseRTT() verbs.Time
	// TakeBinPeak returns the peak queue in bytes on the links into host
	// h since the last call, and starts over.
	TakeBinPeak(h int) int64
	// HostPortsUp counts the hosts' NIC ports whose link is up, of all.
	HostPortsUp() (up, all int)
}

// Figures receives a run's results: figures in order, and time series on
// one time axis (t_us first).
type Figures interface {
	Add(key string, v any)
	AddSeries(key string, v []float64)
}

// ConnRef names a connection of a run: the index of the Dial that opened
// it.
type ConnRef int32

// Completion is a finished message, at either end of its connection.
type Completion struct {
	Conn ConnRef
	// Recv: the message arrived (all of it placed where it goes: at the
	// peer, or for a READ at the dialer); otherwise: the sender learned it
	// was delivered (its own completion).
	Recv  bool
	ID    uint32 // what Post was given
	Bytes int
	OK    bool // false: the work request failed (any error status)
}

// Spec is what a workload knows of its run beyond its own configuration.
type Spec struct {
	Hosts, Leaves, HostsPerLeaf int        // the fabric (host h under leaf h / HostsPerLeaf)
	Planes                      int        // NIC ports per host
	NICGbps                     float64    // each NIC port's rate
	MTU                         int        // transport.mtu
	Warmup, Bin, End            verbs.Time // excluded from steady-state averages; sampling interval; the run's end
	Failures                    []Failure
}

// Failure is one of the run's scheduled failures, as the figures judge
// recovery from it.
type Failure struct {
	At, Recover units.Duration // Recover is never when it does not recover
}

// New returns the workload c describes for a run of sp.
func New(c *Config, sp *Spec) (Workload, error) {
	w := c
	hosts := sp.Hosts
	switch w.Kind {
	case "long-lived":
		if hosts < 2 {
			return nil, fmt.Errorf("workload long-lived needs at least 2 hosts")
		}
		return &longLived{cfg: w, sp: sp}, nil
	case "incast":
		if w.Senders < 1 || w.Senders >= hosts {
			return nil, fmt.Errorf("workload.senders = %d, want 1..%d (hosts - 1)", w.Senders, hosts-1)
		}
		return &incast{cfg: w, sp: sp}, nil
	case "all-to-all", "allreduce":
		n := w.Hosts
		if n == 0 {
			n = hosts
		}
		if n < 2 || n > hosts {
			return nil, fmt.Errorf("workload.hosts = %d, want 2..%d", w.Hosts, hosts)
		}
		if w.Size < units.Size(n*w.Channels) { // channels >= 1 (checked with the defaults)
			return nil, fmt.Errorf("workload.size = %v, want at least one byte per rank and channel (%d)", w.Size, n*w.Channels)
		}
		return &collective{cfg: w, sp: sp, ranks: n, kind: w.Kind, channels: w.Channels}, nil
	}
	return nil, fmt.Errorf("unknown workload %q", w.Kind)
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

// arrive counts n bytes received at now, and reports whether they were
// the ones that completed the flow's target (once per flow).
func (f *flow) arrive(n int64, now verbs.Time) bool {
	f.arrived += n
	if f.target > 0 && f.arrived >= f.target && f.done == verbs.Never {
		f.done = now
		return true
	}
	return false
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

func (m *meter) sample(s Env, sp *Spec) {
	if n := len(m.t); n > 0 && m.t[n-1] >= s.Now() {
		return
	}
	if m.t == nil {
		// Every bin's slot up front: sampling allocates nothing after.
		bins := int(sp.End/sp.Bin) + 2
		m.t = make([]verbs.Time, 0, bins)
		m.total = make([]float64, 0, bins)
	}
	var tot uint64
	var row []float64
	if m.keep {
		row = make([]float64, m.groups)
	}
	for i, r := range m.refs {
		d := s.Delivered(r)
		delta := d - m.last[i]
		m.last[i] = d
		tot += delta
		if m.keep {
			row[m.group[i]] += float64(delta)
		}
	}
	m.t = append(m.t, s.Now())
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
func settleBins(s Env, sp *Spec) int {
	return max(1, int((4*s.BaseRTT()+sp.Bin-1)/sp.Bin))
}

// settledFrom returns the first bin i starting at or after from such that
// every window of k bins lying after bin i's start, up to the bin ending
// at to, satisfies ok(j) (j the window's last bin); -1 if there is none.
func (m *meter) settledFrom(from, to verbs.Time, k int, ok func(j int) bool) int {
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
func capacityGbps(sp *Spec, n int) float64 {
	return float64(n*sp.Planes) * sp.NICGbps
}

// fctFigures adds completion-time percentiles of finished flows.
func fctFigures(r Figures, flows []flow) {
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
	r.Add("fct_p50_us", percentile(fcts, 50))
	r.Add("fct_p99_us", percentile(fcts, 99))
	r.Add("fct_max_us", percentile(fcts, 100))
	r.Add("unfinished_flows", unfinished)
}
