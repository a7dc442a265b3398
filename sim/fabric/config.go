package fabric

import (
	"fmt"
	"time"

	"github.com/metaroce/metaroce/sim/units"
)

// TopologyConfig is the fabric.
type TopologyConfig struct {
	// Kind: back-to-back (two hosts, one direct cable per plane) or
	// leaf-spine (Planes independent leaf-spine planes; with Planes > 1
	// it is the multi-plane fabric; "multi-plane" is accepted as a
	// synonym).
	Kind         string `yaml:"kind"`
	Planes       int    `yaml:"planes"`
	Leaves       int    `yaml:"leaves"`
	Spines       int    `yaml:"spines"`
	HostsPerLeaf int    `yaml:"hosts_per_leaf"`
	// NICGbps is the rate of each host NIC port (one per plane), and of
	// the leaf's port facing it. Default 100.
	NICGbps float64 `yaml:"nic_gbps"`
	// FabricGbps is the rate of leaf-spine links. Default NICGbps.
	FabricGbps float64 `yaml:"fabric_gbps"`
	// LinkDelay is every link's propagation delay. Default 1us.
	LinkDelay units.Duration `yaml:"link_delay"`
	// Buffer is each switch output port's buffer. Default 1MiB.
	Buffer units.Size `yaml:"buffer"`
	ECN    ECNConfig  `yaml:"ecn"`
	// Reconvergence is how long after a link fails or recovers the
	// switches' routing reflects it ("never" = not within a run, the
	// default: the endpoints must route around failures themselves).
	Reconvergence units.Duration `yaml:"reconvergence"`
	// TxQueue is the number of packets a host NIC port may hold waiting
	// to be sent (beside the one on the wire). Default 2.
	TxQueue int `yaml:"tx_queue"`
	// PFC is the optional lossless mode (priority flow control on the
	// switches). Off by default.
	PFC PFCConfig `yaml:"pfc"`
	// LinkGbps sets the rate of individual cables by name (both
	// directions), overriding nic_gbps / fabric_gbps: a slow or degraded
	// link (see docs/sim.md for link names).
	LinkGbps map[string]float64 `yaml:"link_gbps"`
	// ECMP is how a leaf picks among equal-cost uplinks: "hash" (default:
	// a salted hash of the 5-tuple, as switches do) or "modulo" (UDP
	// source port modulo the number of uplinks: consecutive source ports
	// take distinct spines, so an experiment can put exactly one path of
	// a connection on one spine).
	ECMP string `yaml:"ecmp"`
}

// PFCConfig is the lossless mode: PFC-style pause on every switch, one
// priority class for all traffic. Each switch counts the bytes it holds per
// ingress link (a packet counts against the link it arrived on until its
// last bit has left the switch); when a link's count reaches Xoff the
// switch sends a PAUSE to the link's sender, when it falls back to Xon a
// RESUME, each taking effect one propagation delay later. A paused sender
// (a switch port or a host NIC port) finishes the packet on the wire and
// then sends nothing on that link until resumed. Each ingress link gets
// headroom above Xoff for what is already on the wire, so a switch drops
// nothing for congestion; topology.buffer does not apply.
type PFCConfig struct {
	Enabled bool `yaml:"enabled"`
	// Xoff is the ingress count that pauses the sender. Default 256KiB.
	Xoff units.Size `yaml:"xoff"`
	// Xon is the ingress count at or below which the sender is resumed.
	// Default Xoff/2.
	Xon units.Size `yaml:"xon"`
}

// FailureConfig fails a link (both directions of the cable) or a whole
// plane at At, and restores it at Recover (never, if unset).
type FailureConfig struct {
	At      units.Duration `yaml:"at"`
	Recover units.Duration `yaml:"recover"`
	Plane   *int           `yaml:"plane"`
	Link    string         `yaml:"link"`
}

// Defaults fills t's zero fields with the documented defaults and
// validates the result.
func (t *TopologyConfig) Defaults() error {
	switch t.Kind {
	case "", "leaf-spine", "multi-plane":
		t.Kind = "leaf-spine"
	case "back-to-back":
	default:
		return fmt.Errorf("topology.kind = %q, want back-to-back, leaf-spine or multi-plane", t.Kind)
	}
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&t.Planes, 1)
	setInt(&t.Leaves, 2)
	setInt(&t.Spines, 4)
	setInt(&t.HostsPerLeaf, 1)
	setInt(&t.TxQueue, 2)
	if t.NICGbps == 0 {
		t.NICGbps = 100
	}
	if t.FabricGbps == 0 {
		t.FabricGbps = t.NICGbps
	}
	if t.LinkDelay == 0 {
		t.LinkDelay = units.Duration(time.Microsecond)
	}
	if t.Buffer == 0 {
		t.Buffer = 1 << 20
	}
	if t.Reconvergence == 0 {
		t.Reconvergence = units.NeverDuration
	}
	for _, r := range []struct {
		name   string
		v, lim int
	}{
		{"topology.planes", t.Planes, 16}, {"topology.leaves", t.Leaves, 4096},
		{"topology.spines", t.Spines, 1024}, {"topology.hosts_per_leaf", t.HostsPerLeaf, 4096},
		{"topology.tx_queue", t.TxQueue, 64},
	} {
		if r.v < 1 || r.v > r.lim {
			return fmt.Errorf("%s = %d, want 1..%d", r.name, r.v, r.lim)
		}
	}
	if t.Kind == "leaf-spine" && t.Leaves*t.HostsPerLeaf < 2 {
		return fmt.Errorf("topology: leaves × hosts_per_leaf = %d, want at least 2 hosts", t.Leaves*t.HostsPerLeaf)
	}
	if t.Kind == "leaf-spine" && t.Leaves*t.HostsPerLeaf > 65535 {
		return fmt.Errorf("topology: %d hosts, at most 65535", t.Leaves*t.HostsPerLeaf)
	}
	if !(t.NICGbps > 0) || !(t.FabricGbps > 0) {
		return fmt.Errorf("topology: link rates must be positive (nic_gbps %v, fabric_gbps %v)", t.NICGbps, t.FabricGbps)
	}
	if t.LinkDelay < 0 || t.LinkDelay.Never() || t.Buffer < 0 {
		return fmt.Errorf("topology: link_delay %v and buffer %v must be finite and non-negative", t.LinkDelay, t.Buffer)
	}
	if err := t.ECN.Validate(); err != nil {
		return err
	}
	switch t.ECMP {
	case "":
		t.ECMP = "hash"
	case "hash", "modulo":
	default:
		return fmt.Errorf("topology.ecmp = %q, want hash or modulo", t.ECMP)
	}
	for name, g := range t.LinkGbps {
		if !(g > 0) {
			return fmt.Errorf("topology.link_gbps.%s = %v, want a positive rate", name, g)
		}
	}
	if t.PFC.Xoff == 0 {
		t.PFC.Xoff = 256 << 10
	}
	if t.PFC.Xon == 0 {
		t.PFC.Xon = t.PFC.Xoff / 2
	}
	if t.PFC.Xoff < 0 || t.PFC.Xon < 0 || t.PFC.Xon >= t.PFC.Xoff {
		return fmt.Errorf("topology.pfc: want 0 <= xon < xoff, have xon %v xoff %v", t.PFC.Xon, t.PFC.Xoff)
	}
	return nil
}

// ValidateFailures checks a failure schedule against a fabric of planes
// planes (a failure's link name is checked when the fabric is built) and
// gives each failure without a recovery time its default, never.
func ValidateFailures(failures []FailureConfig, planes int) error {
	for i := range failures {
		f := &failures[i]
		if (f.Plane == nil) == (f.Link == "") {
			return fmt.Errorf("failures[%d]: give exactly one of plane and link", i)
		}
		if f.Plane != nil && (*f.Plane < 0 || *f.Plane >= planes) {
			return fmt.Errorf("failures[%d].plane = %d, want 0..%d", i, *f.Plane, planes-1)
		}
		if f.Recover == 0 {
			f.Recover = units.NeverDuration
		}
		if f.At < 0 || f.At.Never() || (!f.Recover.Never() && f.Recover <= f.At) {
			return fmt.Errorf("failures[%d]: want 0 <= at < recover, have at %v recover %v", i, f.At, f.Recover)
		}
	}
	return nil
}

// NumHosts is the number of hosts the topology has.
func (t *TopologyConfig) NumHosts() int {
	if t.Kind == "back-to-back" {
		return 2
	}
	return t.Leaves * t.HostsPerLeaf
}
