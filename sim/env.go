package sim

import (
	"github.com/metaroce/metaroce/verbs"

	"github.com/metaroce/metaroce/sim/fabric"
	"github.com/metaroce/metaroce/sim/workload"
)

// Sim is the workload's Env: the run as its application sees it.
var _ workload.Env = (*Sim)(nil)

// workloadSpec is what the workload of a run of cfg on fab knows of it.
func workloadSpec(cfg *Config, fab *fabric.Fabric) *workload.Spec {
	sp := &workload.Spec{Hosts: fab.Hosts(), Leaves: fab.Leaves(), HostsPerLeaf: fab.HostsPerLeaf(),
		Planes: cfg.Topology.Planes, NICGbps: cfg.Topology.NICGbps, MTU: cfg.Transport.MTU,
		Warmup: cfg.Warmup.T(), Bin: cfg.Bin.T(), End: cfg.Duration.T()}
	for _, f := range cfg.Failures {
		sp.Failures = append(sp.Failures, workload.Failure{At: f.At, Recover: f.Recover})
	}
	return sp
}

// Now is the run's virtual time.
func (s *Sim) Now() verbs.Time { return s.q.Now() }

// Dial opens a connection through the transport's World.
func (s *Sim) Dial(src, dst int) (ConnRef, error) { return s.world.Dial(s.Now(), src, dst) }

// Post sends a message from the workload and marks the host for a kick.
// Its operation comes from workload.ops: the k-th message on connection c
// uses ops[(c+k) mod len(ops)], so that every connection, even one that
// posts a single message, sees the mix.
func (s *Sim) Post(c ConnRef, src int, n int, id uint32) {
	op := s.ops[0]
	if len(s.ops) > 1 {
		for int(c) >= len(s.opNext) {
			s.opNext = append(s.opNext, 0)
		}
		op = s.ops[(int(c)+int(s.opNext[c]))%len(s.ops)]
		s.opNext[c]++
	}
	if err := s.world.Post(s.Now(), c, op, n, id); err != nil {
		s.postErrors++
		return
	}
	s.fab.Posted(src)
}

// Delivered is the payload c's messages have placed so far.
func (s *Sim) Delivered(c ConnRef) uint64 { return s.world.Delivered(c) }

// BaseRTT is the run's base round trip.
func (s *Sim) BaseRTT() verbs.Time { return s.baseRTT }

// TakeBinPeak is the fabric's (see fabric.Fabric.TakeBinPeak).
func (s *Sim) TakeBinPeak(h int) int64 { return s.fab.TakeBinPeak(h) }

// HostPortsUp is the fabric's.
func (s *Sim) HostPortsUp() (up, all int) { return s.fab.HostPortsUp() }
