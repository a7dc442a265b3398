package workload

import "github.com/metaroce/metaroce/sim/units"

// Config is an experiment file's workload section: the traffic.
type Config struct {
	// Kind: long-lived, incast, all-to-all or allreduce.
	Kind string `yaml:"kind"`
	// Pattern (long-lived): pair (every connection from host 0 to host
	// 1) or permutation (host i to host i+H/2 mod H, so every pair
	// crosses the fabric; connections spread round robin over the pairs).
	Pattern string `yaml:"pattern"`
	// Connections (long-lived): total connections. Default 1.
	Connections int `yaml:"connections"`
	// Senders (incast): N, the number of hosts sending to host 0.
	Senders int `yaml:"senders"`
	// Outstanding: messages each connection keeps posted (write_bw's tx
	// depth). Default 4.
	Outstanding int `yaml:"outstanding"`
	// MessageSize: bytes per message. Default 64KiB.
	MessageSize units.Size `yaml:"message_size"`
	// FlowSize (long-lived, incast): bytes each connection moves before it
	// completes; 0 = keep sending until the run ends.
	FlowSize units.Size `yaml:"flow_size"`
	// Hosts (collectives): the ranks; 0 = every host.
	Hosts int `yaml:"hosts"`
	// Placement (collectives): packed (rank r on host r, the default) or
	// spread (ranks dealt over the leaves in turn, so that every ring hop
	// crosses the spines).
	Placement string `yaml:"placement"`
	// Size (collectives): the per-rank buffer, as nccl-tests' size.
	Size units.Size `yaml:"size"`
	// Channels (collectives): connections per rank pair, each moving its
	// own slice of every message, as NCCL's channels. Default 1.
	Channels int `yaml:"channels"`
	// WarmupIters (collectives): untimed iterations before the timed
	// ones, as nccl-tests' -w. Default 0.
	WarmupIters int `yaml:"warmup_iters"`
	// Iters (collectives): timed iterations, as nccl-tests' -n; the
	// figures are their mean. Default 1.
	Iters int `yaml:"iters"`
	// Start delays the workload (connections are opened at 0, data
	// starts at Start). Default 0.
	Start units.Duration `yaml:"start"`
	// Ops are the operations messages use, in rotation: the k-th message
	// posted on connection c (c in Dial order, from 0) uses
	// Ops[(c+k) mod len(Ops)]; repeat a name to weight it. write,
	// write_imm, send, send_imm, read. Default [write_imm].
	Ops []string `yaml:"ops"`
}
