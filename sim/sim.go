package sim

import (
	"fmt"
	"github.com/metaroce/metaroce/verbs"
	"sync/atomic"

	"github.com/metaroce/metaroce/sim/event"
	"github.com/metaroce/metaroce/sim/fabric"
	"github.com/metaroce/metaroce/sim/workload"
)

// The run's own events, after the fabric's kinds (the fabric handles
// those).
const (
	evSample event.Kind = fabric.NumKinds + iota // the periodic measurement tick
	evStop                                       // the run's virtual time is up
	evBegin                                      // the workload starts sending
)

// Sim is one run: one transport on one fabric under one workload. It is
// single-threaded and deterministic: everything it does follows from its
// configuration, in event order. It owns the run's event queue (its
// clock), hands the fabric its events and runs the workload's; the
// workload posts through it.
type Sim struct {
	cfg *Config
	end verbs.Time
	q   event.Queue
	fab *fabric.Fabric

	world   World
	wl      workload.Workload
	ops     []Op             // workload.ops, in rotation
	opNext  []uint32         // messages posted so far per connection, when len(ops) > 1
	sink    func(Completion) // s.onCompletion, bound once (a method value allocates)
	baseRTT verbs.Time

	stopped  bool
	finishAt verbs.Time // when a finite workload finished (Never: not yet)
	events   uint64

	// counters
	failedWRs  uint64
	postErrors uint64

	progress *atomic.Int64 // virtual ns reached, for progress bars; may be nil
}

// runSpec is everything one run needs.
type runSpec struct {
	cfg       *Config
	transport Transport
	params    any
	tap       *fabric.Tap
	progress  *atomic.Int64
}

func newSim(rs runSpec) (*Sim, error) {
	cfg := rs.cfg
	s := &Sim{cfg: cfg, end: cfg.Duration.T(), finishAt: verbs.Never, progress: rs.progress}
	fab, err := fabric.New(fabric.Spec{Topology: &cfg.Topology, Loss: &cfg.Loss, Failures: cfg.Failures,
		Seed: cfg.Seed, DPort: rs.transport.UDPPort()}, &s.q)
	if err != nil {
		return nil, err
	}
	s.fab = fab
	wl, err := workload.New(&cfg.Workload, workloadSpec(cfg, fab))
	if err != nil {
		return nil, err
	}
	s.wl = wl
	env := WorldEnv{Hosts: fab.Hosts(), Planes: cfg.Topology.Planes, MTU: cfg.Transport.MTU, NICGbps: cfg.Topology.NICGbps,
		MaxMessage: wl.MaxMessage(), Outstanding: cfg.Workload.Outstanding, Seed: cfg.Seed, Ops: workloadOps(&cfg.Workload)}
	s.ops = env.Ops
	world, err := rs.transport.NewWorld(env, rs.params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rs.transport.Name(), err)
	}
	s.world = world
	s.sink = s.onCompletion
	fab.Attach(world.Host, s.pollHost, rs.tap)
	data, ack := rs.transport.PacketLens(cfg.Transport.MTU)
	s.baseRTT = fab.BaseRTT(data, ack)
	return s, nil
}

// run executes the run to its end and returns its result.
func (s *Sim) run() (*runResult, error) {
	if err := s.start(); err != nil {
		return nil, err
	}
	s.runUntil(verbs.Never)
	if s.progress != nil {
		s.progress.Store(int64(s.end))
	}
	return s.result(), nil
}

// start opens the workload's connections and schedules the run's fixed
// events.
func (s *Sim) start() error {
	if err := s.wl.Setup(s); err != nil {
		return err
	}
	s.fab.KickAll()
	s.q.Push(s.cfg.Workload.Start.T(), evBegin, 0, 0)
	s.q.Push(s.cfg.Bin.T(), evSample, 0, 0)
	s.q.Push(s.end, evStop, 0, 0)
	s.fab.ScheduleFaults(s.end)
	return nil
}

// runUntil processes events up to and including time limit, or until the
// run stops.
func (s *Sim) runUntil(limit verbs.Time) {
	for !s.stopped && s.q.Len() > 0 && s.q.Peek().At <= limit {
		e := s.q.Pop()
		s.events++
		switch e.Kind {
		case evSample:
			s.wl.Sample(s)
			if next := s.Now() + s.cfg.Bin.T(); next <= s.end {
				s.q.Push(next, evSample, 0, 0)
			}
		case evBegin:
			s.wl.Begin(s)
			s.fab.FlushDirty()
		case evStop:
			s.stopped = true
		default:
			s.fab.Handle(&e)
		}
		if s.finishAt == verbs.Never && s.wl.Finished() {
			s.finishAt = s.Now()
			s.stopped = true
		}
		if s.progress != nil && s.events&4095 == 0 {
			s.progress.Store(int64(s.Now()))
		}
	}
}

// pollHost is host h's application's turn: the transport's completions go
// to the workload (which may post more work).
func (s *Sim) pollHost(h int) {
	s.world.Poll(s.Now(), h, s.sink)
}

func (s *Sim) onCompletion(c Completion) {
	if !c.OK {
		s.failedWRs++
	}
	s.wl.OnCompletion(s, c)
}
