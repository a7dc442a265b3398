package sim

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/metaroce/metaroce/sim/fabric"
	"github.com/metaroce/metaroce/sim/workload"
)

// Config is one experiment file (configs/experiments/*.yaml), decoded
// strictly: an unknown key anywhere is an error naming the key and the
// file. docs/sim.md documents every key; zero values mean the documented
// default (see defaults).
type Config struct {
	Experiment  string `yaml:"experiment"`
	Description string `yaml:"description"`
	// Seed drives every random choice of a run (loss, RED marks); the same
	// seed and configuration give bit-identical results.
	Seed uint64 `yaml:"seed"`
	// Transports lists the transports to run, side by side, in this order.
	// Default: every registered transport.
	Transports []string `yaml:"transports"`
	// Duration is the virtual time a run lasts (finite workloads stop when
	// they finish, or fail the run if they have not by then).
	Duration Duration `yaml:"duration"`
	// Warmup is excluded from steady-state averages.
	Warmup Duration `yaml:"warmup"`
	// Bin is the sampling interval of time series. Default 10us.
	Bin Duration `yaml:"bin"`

	Topology  fabric.TopologyConfig  `yaml:"topology"`
	Loss      fabric.LossConfig      `yaml:"loss"`
	Failures  []fabric.FailureConfig `yaml:"failures"`
	Transport TransportConfig        `yaml:"transport"`
	Workload  workload.Config        `yaml:"workload"`
	// Sweep maps keys of this file (dotted paths, as for --set) to lists of
	// values; every combination is one run per transport. Kept as a node:
	// Experiment parses it in order.
	Sweep  yaml.Node    `yaml:"sweep"`
	Report ReportConfig `yaml:"report"`
	Pcap   PcapConfig   `yaml:"pcap"`
}

// TransportConfig holds what all transports share (MTU) and one section
// per transport, named by the transport, decoded into that transport's own
// parameter struct (see Transport.NewParams).
type TransportConfig struct {
	// MTU is the payload bytes per data packet. Default 4096.
	MTU int                  `yaml:"mtu"`
	Per map[string]yaml.Node `yaml:",inline"`
}

// workloadOps returns the parsed operations of w (validated by
// defaults).
func workloadOps(w *workload.Config) []Op {
	if len(w.Ops) == 0 {
		return []Op{OpWriteImm}
	}
	ops := make([]Op, len(w.Ops))
	for i, n := range w.Ops {
		ops[i], _ = ParseOp(n)
	}
	return ops
}

// ReportConfig says how results are summarised.
type ReportConfig struct {
	// Baseline makes efficiency relative: efficiency = goodput / goodput
	// of the run of the same transport whose swept keys are equal except
	// those named here, which take the given values (loss-sweep: loss.rate
	// 0). Without it efficiency = goodput / link_gbps.
	Baseline map[string]string `yaml:"baseline"`
	// Columns are the row fields the table shows (JSON has them all).
	Columns []string `yaml:"columns"`
	// Plots are the PNGs --out draws.
	Plots []PlotConfig `yaml:"plots"`
}

// PlotConfig is one PNG.
type PlotConfig struct {
	// Name is the file name's suffix: DIR/<experiment>-<name>.png (just
	// <experiment>.png when empty).
	Name  string `yaml:"name"`
	Title string `yaml:"title"`
	// Kind: line (X and Y are row fields, one line per distinct value of
	// the Series fields) or series (X is time, Y names a time series, one
	// line per run).
	Kind   string   `yaml:"kind"`
	X      string   `yaml:"x"`
	Y      string   `yaml:"y"`
	Series []string `yaml:"series"`
	XLabel string   `yaml:"xlabel"`
	YLabel string   `yaml:"ylabel"`
}

// PcapConfig chooses what --pcap captures.
type PcapConfig struct {
	// Host whose NIC ports are captured (both directions). Default 0.
	Host int `yaml:"host"`
	// Run is the index of the run captured, in run order. Default 0.
	Run int `yaml:"run"`
	// Snaplen bytes of each frame are kept. Default 256.
	Snaplen int `yaml:"snaplen"`
	// MaxPackets bounds the capture. Default 200000.
	MaxPackets int `yaml:"max_packets"`
}

// defaults fills zero fields and validates the result.
func (c *Config) defaults() error {
	if c.Duration == 0 {
		c.Duration = Duration(time.Millisecond)
	}
	if c.Bin == 0 {
		c.Bin = Duration(10 * time.Microsecond)
	}
	if c.Duration.Never() || c.Duration <= 0 {
		return fmt.Errorf("duration = %v, want a positive time", c.Duration)
	}
	if c.Warmup < 0 || c.Warmup >= c.Duration {
		return fmt.Errorf("warmup = %v, want 0 <= warmup < duration (%v)", c.Warmup, c.Duration)
	}
	if c.Bin <= 0 || c.Bin.Never() {
		return fmt.Errorf("bin = %v, want a positive time", c.Bin)
	}
	if err := c.Topology.Defaults(); err != nil {
		return err
	}
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if err := c.Loss.Validate(); err != nil {
		return err
	}
	if err := fabric.ValidateFailures(c.Failures, c.Topology.Planes); err != nil {
		return err
	}
	if c.Transport.MTU == 0 {
		c.Transport.MTU = 4096
	}
	w := &c.Workload
	switch w.Kind {
	case "long-lived", "incast", "all-to-all", "allreduce":
	case "":
		return fmt.Errorf("workload.kind is missing (long-lived, incast, all-to-all or allreduce)")
	default:
		return fmt.Errorf("workload.kind = %q, want long-lived, incast, all-to-all or allreduce", w.Kind)
	}
	if w.Pattern == "" {
		w.Pattern = "pair"
	}
	if w.Pattern != "pair" && w.Pattern != "permutation" {
		return fmt.Errorf("workload.pattern = %q, want pair or permutation", w.Pattern)
	}
	setInt(&w.Connections, 1)
	setInt(&w.Outstanding, 4)
	if w.MessageSize == 0 {
		w.MessageSize = 64 << 10
	}
	switch w.Placement {
	case "":
		w.Placement = "packed"
	case "packed", "spread":
	default:
		return fmt.Errorf("workload.placement = %q, want packed or spread", w.Placement)
	}
	setInt(&w.Iters, 1)
	setInt(&w.Channels, 1)
	if w.Channels < 1 || w.Channels > 64 {
		return fmt.Errorf("workload.channels = %d, want 1..64", w.Channels)
	}
	if w.WarmupIters < 0 || w.Iters < 1 || w.WarmupIters+w.Iters > 1000 {
		return fmt.Errorf("workload: warmup_iters = %d and iters = %d, want warmup_iters >= 0, iters >= 1, together at most 1000", w.WarmupIters, w.Iters)
	}
	if w.Connections < 1 || w.Outstanding < 1 || w.MessageSize < 1 || w.Senders < 0 || w.Hosts < 0 || w.FlowSize < 0 || w.Size < 0 {
		return fmt.Errorf("workload: counts and sizes must be positive")
	}
	if w.MessageSize > 1<<30 || w.Size > 1<<34 {
		return fmt.Errorf("workload: message_size (%v) at most 1GiB, size (%v) at most 16GiB", w.MessageSize, w.Size)
	}
	for i, n := range w.Ops {
		if _, err := ParseOp(n); err != nil {
			return fmt.Errorf("workload.ops[%d]: %w", i, err)
		}
	}
	if w.Start < 0 || w.Start.Never() || w.Start >= c.Duration {
		return fmt.Errorf("workload.start = %v, want 0 <= start < duration", w.Start)
	}
	if p := &c.Pcap; true {
		setInt(&p.Snaplen, 256)
		setInt(&p.MaxPackets, 200000)
		if p.Host < 0 || p.Run < 0 || p.Snaplen < 64 || p.MaxPackets < 1 {
			return fmt.Errorf("pcap: host and run must be >= 0, snaplen >= 64, max_packets >= 1")
		}
	}
	for i, p := range c.Report.Plots {
		switch p.Kind {
		case "", "line", "series":
		default:
			return fmt.Errorf("report.plots[%d].kind = %q, want line or series", i, p.Kind)
		}
		if p.Y == "" {
			return fmt.Errorf("report.plots[%d].y is missing", i)
		}
	}
	return nil
}
