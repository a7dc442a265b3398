package fabric

import (
	"github.com/metaroce/metaroce/verbs"

	"github.com/metaroce/metaroce/sim/event"
	"github.com/metaroce/metaroce/sim/units"
)

// The fabric's events; a run gives its own events the kinds from NumKinds
// on and hands the fabric's back to Handle.
const (
	evArrive     event.Kind = iota // packet b reaches the far end of link a
	evTxDone                       // host NIC port a finished serializing a packet
	evTimer                        // host a's transport timer, armed as generation b
	evFault                        // fault a of the schedule happens (b=0) or ends (b=1)
	evReconverge                   // routing converges on the current link states
	evPortDone                     // lossless mode: switch port a finished serializing a packet
	evPause                        // lossless mode: a PAUSE (b=1) or RESUME (b=0) reaches link a's sender

	// NumKinds is the number of event kinds the fabric schedules.
	NumKinds
)

// Fabric is the modelled network of one run: the links with their output
// queues, ECN markers, loss processes, failures and lossless-mode state;
// the switches and their ECMP routing; and each host's NIC side (its ports
// and the timer of its transport endpoint). It moves packets between the
// hosts' transport endpoints in event order. What the hosts' applications
// do is not its business: after every transport call that may have
// completed work it gives the host's application its turn (the app
// function), and the application marks hosts it posted work on with
// Posted.
//
// A Fabric shares its run's event queue, which is also the run's clock:
// it schedules its own events there (kinds below NumKinds) and the run
// hands them back to Handle in order.
type Fabric struct {
	q       *event.Queue
	pool    packetPool
	topo    *topology
	links   []link
	hosts   []host
	planes  int
	dport   uint16
	txQueue int
	dirty   []int32
	app     func(h int) // host h's application's turn: completions, posts
	tap     *Tap
	pfc     pfcState // lossless mode (topology.pfc)
	pfcCfg  PFCConfig

	failures      []FailureConfig
	reconvergence units.Duration

	// counters
	hostTx, hostRx uint64
	noRoute        uint64
	badPackets     uint64
	timerSpins     uint64 // OnTimer left its deadline in the past (a transport bug)
}

// Spec is what a fabric is built from.
type Spec struct {
	Topology *TopologyConfig
	Loss     *LossConfig
	Failures []FailureConfig
	// Seed salts the ECMP hashes and seeds every link's loss process and
	// marker.
	Seed uint64
	// DPort is the UDP destination port of the transport's packets: ECMP
	// hashes it and captures show it.
	DPort uint16
}

// New wires the fabric of sp; q is the run's event queue. The hosts
// have no endpoints until Attach.
func New(sp Spec, q *event.Queue) (*Fabric, error) {
	topo, err := buildTopology(sp.Topology, sp.Loss, sp.Failures, sp.Seed)
	if err != nil {
		return nil, err
	}
	return &Fabric{q: q, topo: topo, links: topo.links, planes: topo.planes, dport: sp.DPort,
		txQueue: sp.Topology.TxQueue, pfcCfg: sp.Topology.PFC, failures: sp.Failures,
		reconvergence: sp.Topology.Reconvergence}, nil
}

// Attach gives every host h its transport endpoint endpoint(h) and its
// application's turn app(h); tap, if not nil, sees one host's packets.
func (f *Fabric) Attach(endpoint func(h int) verbs.Transport, app func(h int), tap *Tap) {
	f.app, f.tap = app, tap
	var maxLen int
	f.hosts = make([]host, f.topo.hosts)
	for i := range f.hosts {
		h := &f.hosts[i]
		h.id, h.tr, h.timerAt, h.firedAt = int32(i), endpoint(i), verbs.Never, -1
		maxLen = max(maxLen, h.tr.MaxPacketLen())
		h.ports = make([]hostPort, f.topo.planes)
		for p := range h.ports {
			h.ports[p] = hostPort{link: f.topo.hostPorts[i][p], q: make([]int32, 2*f.txQueue)}
		}
	}
	f.pool = newPacketPool(maxLen)
	f.setupPFC(int64(maxLen) + wireOverhead)
}

// Hosts is the number of hosts.
func (f *Fabric) Hosts() int { return f.topo.hosts }

// Leaves is the number of leaves per plane, and HostsPerLeaf the hosts
// under each (host h is under leaf h / HostsPerLeaf).
func (f *Fabric) Leaves() int       { return f.topo.leaves }
func (f *Fabric) HostsPerLeaf() int { return f.topo.hostsPerLeaf }

// BaseRTT is the round trip of one data packet of dataLen bytes out and
// one ACK of ackLen back over the longest route of the idle fabric.
func (f *Fabric) BaseRTT(dataLen, ackLen int) verbs.Time {
	return verbs.Time(f.topo.baseRTT(dataLen, ackLen))
}

// KickAll lets every host's transport send what it has (the run's start).
func (f *Fabric) KickAll() {
	for i := range f.hosts {
		f.kick(&f.hosts[i])
	}
}

// ScheduleFaults schedules the failures (and recoveries) that happen
// before end.
func (f *Fabric) ScheduleFaults(end verbs.Time) {
	for i, fc := range f.failures {
		f.q.Push(fc.At.T(), evFault, int32(i), 0)
		if !fc.Recover.Never() && fc.Recover.T() < end {
			f.q.Push(fc.Recover.T(), evFault, int32(i), 1)
		}
	}
}

// Handle processes one of the fabric's events (kind below NumKinds).
func (f *Fabric) Handle(e *event.Event) {
	switch e.Kind {
	case evArrive:
		f.arrive(e.A, e.B)
	case evTxDone:
		f.txDone(e.A)
	case evPortDone:
		f.pfcPortDone(e.A)
	case evPause:
		f.pfcPause(e.A, e.B == 1)
	case evTimer:
		f.onTimer(e.A, e.B)
	case evFault:
		f.fault(int(e.A), e.B == 1)
	case evReconverge:
		f.topo.reconverge()
	}
}

// arrive: packet pi reached the far end of link li.
func (f *Fabric) arrive(li, pi int32) {
	l := &f.links[li]
	if !l.survives() {
		f.pool.put(pi)
		return
	}
	if int(l.to) < len(f.hosts) {
		f.deliver(pi)
		return
	}
	p := f.pool.at(pi)
	sw := &f.topo.sws[int(l.to)-len(f.hosts)]
	out := f.topo.route(sw, p, f.dport)
	if out < 0 {
		f.noRoute++
		f.pool.put(pi)
		return
	}
	if f.pfc.on {
		f.pfcForward(li, out, pi)
		return
	}
	ol := &f.links[out]
	arrive, ce, ok := ol.enqueue(int64(f.q.Now())*1000, p.wireBytes(), p.ect)
	if !ok {
		f.pool.put(pi)
		return
	}
	p.ce = p.ce || ce
	f.q.Push(verbs.Time(psToNs(arrive)), evArrive, out, pi)
}

// fault applies failure i (or its recovery) and schedules the routing's
// reaction.
func (f *Fabric) fault(i int, recover bool) {
	fc := &f.failures[i]
	if fc.Plane != nil {
		f.topo.setPlane(*fc.Plane, !recover)
	} else {
		f.topo.setCable(fc.Link, !recover)
	}
	if rc := f.reconvergence; !rc.Never() && f.topo.kind != "back-to-back" {
		f.q.Push(f.q.Now()+rc.T(), evReconverge, 0, 0)
	}
}

// Stats are the fabric's counters: the links' summed, and the
// hosts' NIC sides'.
type Stats struct {
	BufferDrops, LossDrops, DownDrops, CEMarks uint64
	NoRoute                                    uint64 // packets a switch had no route for
	PeakQueue                                  int64  // the largest queue at a switch port, bytes
	HostTx, HostRx                             uint64 // packets the hosts' NICs sent and received
	BadPackets                                 uint64 // packets a transport handed over malformed
	TimerSpins                                 uint64 // transport timers re-armed at the instant they ran
}

// Stats sums the fabric's counters.
func (f *Fabric) Stats() Stats {
	st := Stats{NoRoute: f.noRoute, HostTx: f.hostTx, HostRx: f.hostRx,
		BadPackets: f.badPackets, TimerSpins: f.timerSpins}
	for i := range f.links {
		l := &f.links[i]
		st.BufferDrops += l.bufferDrops
		st.LossDrops += l.lossDrops
		st.DownDrops += l.downDrops
		st.CEMarks += l.ceMarks
		if int(l.from) >= len(f.hosts) && l.peakQueue > st.PeakQueue {
			st.PeakQueue = l.peakQueue
		}
	}
	return st
}

// TakeBinPeak returns the largest queue a packet found ahead of it on the
// links into host h since the last call (or the start), in bytes, and
// starts over: a per-bin series of the queue at a receiver.
func (f *Fabric) TakeBinPeak(h int) int64 {
	var q int64
	for i := range f.links {
		if l := &f.links[i]; int(l.to) == h {
			q = max(q, l.binPeak)
			l.binPeak = 0
		}
	}
	return q
}

// HostPortsUp counts the hosts' NIC ports whose link is up, of all.
func (f *Fabric) HostPortsUp() (up, all int) {
	for h := range f.topo.hostPorts {
		for _, li := range f.topo.hostPorts[h] {
			all++
			if !f.links[li].down {
				up++
			}
		}
	}
	return up, all
}
