package sim

import (
	"fmt"
	"sync/atomic"

	"github.com/metaroce/metaroce/verbs"
)

// Sim is one run: one transport on one fabric under one workload. It is
// single-threaded and deterministic: everything it does follows from its
// configuration, in event order.
type Sim struct {
	cfg    *Config
	tname  string
	now    verbs.Time
	end    verbs.Time
	q      eventQueue
	pool   packetPool
	topo   *topology
	links  []link
	hosts  []host
	planes int
	dport  uint16

	world   World
	wl      workload
	ops     []Op     // workload.ops, in rotation
	opNext  []uint32 // messages posted so far per connection, when len(ops) > 1
	txQueue int
	dirty   []int32
	sink    func(Completion) // s.onCompletion, bound once (a method value allocates)
	tap     *capture
	baseRTT verbs.Time
	pfc     pfcState // lossless mode (topology.pfc)

	stopped  bool
	finishAt verbs.Time // when a finite workload finished (Never: not yet)
	events   uint64

	// counters
	hostTx, hostRx uint64
	noRoute        uint64
	badPackets     uint64
	failedWRs      uint64
	postErrors     uint64
	timerSpins     uint64 // OnTimer left its deadline in the past (a transport bug)

	progress *atomic.Int64 // virtual ns reached, for progress bars; may be nil
}

// runSpec is everything one run needs.
type runSpec struct {
	cfg       *Config
	transport Transport
	params    any
	tap       *capture
	progress  *atomic.Int64
}

func newSim(rs runSpec) (*Sim, error) {
	cfg := rs.cfg
	topo, err := buildTopology(cfg, cfg.Seed)
	if err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, tname: rs.transport.Name(), end: cfg.Duration.T(), topo: topo, links: topo.links,
		planes: topo.planes, dport: rs.transport.UDPPort(), txQueue: cfg.Topology.TxQueue,
		finishAt: verbs.Never, tap: rs.tap, progress: rs.progress}
	wl, err := newWorkload(cfg, topo.hosts)
	if err != nil {
		return nil, err
	}
	s.wl = wl
	env := WorldEnv{Hosts: topo.hosts, Planes: topo.planes, MTU: cfg.Transport.MTU, NICGbps: cfg.Topology.NICGbps,
		MaxMessage: wl.maxMessage(), Outstanding: cfg.Workload.Outstanding, Seed: cfg.Seed, Ops: cfg.Workload.ops()}
	s.ops = env.Ops
	world, err := rs.transport.NewWorld(env, rs.params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rs.transport.Name(), err)
	}
	s.world = world
	s.sink = s.onCompletion
	var maxLen int
	s.hosts = make([]host, topo.hosts)
	for i := range s.hosts {
		h := &s.hosts[i]
		h.id, h.tr, h.timerAt, h.firedAt = int32(i), world.Host(i), verbs.Never, -1
		maxLen = max(maxLen, h.tr.MaxPacketLen())
		h.ports = make([]hostPort, topo.planes)
		for p := range h.ports {
			h.ports[p] = hostPort{link: topo.hostPorts[i][p], q: make([]int32, 2*s.txQueue)}
		}
	}
	s.pool = newPacketPool(maxLen)
	s.setupPFC(int64(maxLen) + wireOverhead)
	data, ack := rs.transport.PacketLens(cfg.Transport.MTU)
	s.baseRTT = verbs.Time(topo.baseRTT(data, ack))
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
	if err := s.wl.setup(s); err != nil {
		return err
	}
	for i := range s.hosts {
		s.kick(&s.hosts[i])
	}
	s.q.push(s.cfg.Workload.Start.T(), evBegin, 0, 0)
	s.q.push(s.cfg.Bin.T(), evSample, 0, 0)
	s.q.push(s.end, evStop, 0, 0)
	for i, f := range s.cfg.Failures {
		s.q.push(f.At.T(), evFault, int32(i), 0)
		if !f.Recover.Never() && f.Recover.T() < s.end {
			s.q.push(f.Recover.T(), evFault, int32(i), 1)
		}
	}
	return nil
}

// runUntil processes events up to and including time limit, or until the
// run stops.
func (s *Sim) runUntil(limit verbs.Time) {
	for !s.stopped && s.q.len() > 0 && s.q.peek().at <= limit {
		e := s.q.pop()
		s.now = e.at
		s.events++
		switch e.kind {
		case evArrive:
			s.arrive(e.a, e.b)
		case evTxDone:
			s.txDone(e.a)
		case evPortDone:
			s.pfcPortDone(e.a)
		case evPause:
			s.pfcPause(e.a, e.b == 1)
		case evTimer:
			s.onTimer(e.a, e.b)
		case evSample:
			s.wl.sample(s)
			if next := s.now + s.cfg.Bin.T(); next <= s.end {
				s.q.push(next, evSample, 0, 0)
			}
		case evBegin:
			s.wl.begin(s)
			s.flushDirty(nil)
		case evFault:
			s.fault(int(e.a), e.b == 1)
		case evReconverge:
			s.topo.reconverge()
		case evStop:
			s.stopped = true
		}
		if s.finishAt == verbs.Never && s.wl.finished() {
			s.finishAt = s.now
			s.stopped = true
		}
		if s.progress != nil && s.events&4095 == 0 {
			s.progress.Store(int64(s.now))
		}
	}
}

// arrive: packet pi reached the far end of link li.
func (s *Sim) arrive(li, pi int32) {
	l := &s.links[li]
	if !l.survives() {
		s.pool.put(pi)
		return
	}
	if int(l.to) < len(s.hosts) {
		s.deliver(pi)
		return
	}
	p := s.pool.at(pi)
	sw := &s.topo.sws[int(l.to)-len(s.hosts)]
	out := s.topo.route(sw, p, s.dport)
	if out < 0 {
		s.noRoute++
		s.pool.put(pi)
		return
	}
	if s.pfc.on {
		s.pfcForward(li, out, pi)
		return
	}
	ol := &s.links[out]
	arrive, ce, ok := ol.enqueue(int64(s.now)*1000, p.wireBytes(), p.ect)
	if !ok {
		s.pool.put(pi)
		return
	}
	p.ce = p.ce || ce
	s.q.push(verbs.Time(psToNs(arrive)), evArrive, out, pi)
}

// fault applies failure i (or its recovery) and schedules the routing's
// reaction.
func (s *Sim) fault(i int, recover bool) {
	f := &s.cfg.Failures[i]
	if f.Plane != nil {
		s.topo.setPlane(*f.Plane, !recover)
	} else {
		s.topo.setCable(f.Link, !recover)
	}
	if rc := s.cfg.Topology.Reconvergence; !rc.Never() && s.topo.kind != "back-to-back" {
		s.q.push(s.now+rc.T(), evReconverge, 0, 0)
	}
}

// fabricStats sums the links' counters.
type fabricStats struct {
	bufferDrops, lossDrops, downDrops, ceMarks uint64
	peakQueue                                  int64
}

func (s *Sim) fabricStats() fabricStats {
	var f fabricStats
	for i := range s.links {
		l := &s.links[i]
		f.bufferDrops += l.bufferDrops
		f.lossDrops += l.lossDrops
		f.downDrops += l.downDrops
		f.ceMarks += l.ceMarks
		if int(l.from) >= len(s.hosts) && l.peakQueue > f.peakQueue {
			f.peakQueue = l.peakQueue
		}
	}
	return f
}
