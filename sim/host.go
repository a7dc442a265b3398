package sim

import (
	"github.com/metaroce/metaroce/verbs"
)

// host is one end system: a transport endpoint that carries all the
// host's connections, and one NIC port per plane.
type host struct {
	id    int32
	tr    verbs.Transport
	ports []hostPort
	// queued counts packets waiting in all ports (not the ones on the wire).
	queued int
	// The transport's timer: at most one live event, for the earliest
	// deadline asked for; events of older generations are ignored when
	// they fire.
	timerAt  verbs.Time
	timerGen int32
	firedAt  verbs.Time // when OnTimer last ran
	dirty    bool       // the application posted work: pull packets after the current event
}

// hostPort is a NIC port: a small FIFO of packets (indices into the pool)
// in front of the link, so that the transport decides the order of
// packets until the last moment.
type hostPort struct {
	link int32
	q    []int32 // ring of cap hard-limit
	head int
	n    int
	busy bool // a packet is being serialized
}

func (p *hostPort) push(pi int32) {
	p.q[(p.head+p.n)%len(p.q)] = pi
	p.n++
}

func (p *hostPort) pop() int32 {
	v := p.q[p.head]
	p.head = (p.head + 1) % len(p.q)
	p.n--
	return v
}

// canPull says whether the host may take another packet from its
// transport. The transport chooses the plane (port) of a packet, not the
// host, so the host pulls while some port has fewer than txQueue packets
// waiting and no port holds its hard limit (2·txQueue): a port whose plane
// the transport keeps choosing fills to the hard limit and then holds the
// others back, as a NIC's shared send queue would.
func (s *Sim) canPull(h *host) bool {
	some := false
	for i := range h.ports {
		n := h.ports[i].n
		if n >= len(h.ports[i].q) {
			return false
		}
		if n < s.txQueue {
			some = true
		}
	}
	return some
}

// kick moves packets from h's transport into its NIC ports while they
// have room, starts idle ports, and re-arms h's timer. Every event that
// touches a host's transport ends with it.
func (s *Sim) kick(h *host) {
	h.dirty = false
	steer, _ := h.tr.(verbs.PlaneSteering)
	for s.canPull(h) {
		if steer != nil && len(h.ports) > 1 {
			// Tell the transport which NIC ports have room, as a NIC
			// driver's per-queue TX state would.
			var mask uint32
			for i := range h.ports {
				if h.ports[i].n < s.txQueue {
					mask |= 1 << i
				}
			}
			steer.SetReadyPlanes(mask)
		}
		pi := s.pool.get()
		p := s.pool.at(pi)
		meta, ok := h.tr.NextPacket(s.now, p.buf)
		if !ok {
			s.pool.put(pi)
			break
		}
		if int(meta.Peer) >= len(s.hosts) || meta.Len <= 0 || meta.Len > len(p.buf) {
			s.badPackets++
			s.pool.put(pi)
			continue
		}
		p.n = int32(meta.Len)
		p.src, p.dst = h.id, int32(meta.Peer)
		p.sport, p.plane = uint16(meta.Entropy), uint8(int(meta.Plane)%len(h.ports))
		p.ce, p.ect = false, true
		s.hostTx++
		if s.tap != nil && s.tap.host == h.id {
			s.tap.packet(s.now, s, p, true)
		}
		port := &h.ports[p.plane]
		port.push(pi)
		h.queued++
		if !port.busy && !s.links[port.link].pfc.paused {
			s.startTx(h, int(p.plane))
		}
	}
	s.arm(h)
}

// startTx puts the next packet of port pi on the wire.
func (s *Sim) startTx(h *host, pi int) {
	port := &h.ports[pi]
	pk := port.pop()
	h.queued--
	port.busy = true
	l := &s.links[port.link]
	b := s.pool.at(pk).wireBytes()
	s.pfcNote(pfcTx, port.link, b)
	arrive, _, _ := l.enqueue(int64(s.now)*1000, b, false)
	s.q.push(verbs.Time(psToNs(l.freeAt)), evTxDone, h.id*int32(s.planes)+int32(pi), 0)
	s.q.push(verbs.Time(psToNs(arrive)), evArrive, port.link, pk)
}

// txDone: port gp (host·planes+plane) finished a packet.
func (s *Sim) txDone(gp int32) {
	h := &s.hosts[gp/int32(s.planes)]
	pi := int(gp % int32(s.planes))
	port := &h.ports[pi]
	port.busy = false
	if port.n > 0 && !s.links[port.link].pfc.paused {
		s.startTx(h, pi)
	}
	s.kick(h)
}

// arm makes sure an event is scheduled for h's transport deadline: only
// an earlier deadline schedules a new event; when an early event fires and
// finds the deadline moved later, onTimer re-arms for the new one.
func (s *Sim) arm(h *host) {
	d := h.tr.NextDeadline()
	if d >= h.timerAt {
		return
	}
	at := max(d, s.now)
	if at == h.firedAt {
		// The transport asks for OnTimer again at the instant it just ran,
		// against the contract (OnTimer leaves NextDeadline in the
		// future): move on by a nanosecond rather than spin forever.
		at++
		s.timerSpins++
	}
	h.timerGen++
	h.timerAt = d
	s.q.push(at, evTimer, h.id, h.timerGen)
}

func (s *Sim) onTimer(hid, gen int32) {
	h := &s.hosts[hid]
	if gen != h.timerGen {
		return // superseded by an earlier deadline
	}
	h.timerAt = verbs.Never
	if h.tr.NextDeadline() <= s.now {
		h.firedAt = s.now
		h.tr.OnTimer(s.now)
		s.poll(h)
	}
	s.kick(h)
}

// deliver hands packet pi to its destination host.
func (s *Sim) deliver(pi int32) {
	p := s.pool.at(pi)
	h := &s.hosts[p.dst]
	if s.tap != nil && s.tap.host == h.id {
		s.tap.packet(s.now, s, p, false)
	}
	s.hostRx++
	h.tr.Receive(s.now, p.buf[:p.n], verbs.RxMeta{Peer: verbs.PeerHandle(p.src), Plane: verbs.PlaneID(p.plane), CE: p.ce})
	s.pool.put(pi)
	s.poll(h)
	s.kick(h)
}

// poll passes h's completions to the workload; hosts the workload posted
// work on are kicked right after (the application's posts happen between
// transport calls, never inside one).
func (s *Sim) poll(h *host) {
	s.world.Poll(s.now, int(h.id), s.sink)
	s.flushDirty(h)
}

func (s *Sim) onCompletion(c Completion) {
	if !c.OK {
		s.failedWRs++
	}
	s.wl.completion(s, c)
}

// posted marks host hid as having new work to send.
func (s *Sim) posted(hid int) {
	h := &s.hosts[hid]
	if !h.dirty {
		h.dirty = true
		s.dirty = append(s.dirty, int32(hid))
	}
}

// flushDirty kicks every host with new work except skip, which the caller
// kicks itself.
func (s *Sim) flushDirty(skip *host) {
	for len(s.dirty) > 0 {
		hid := s.dirty[len(s.dirty)-1]
		s.dirty = s.dirty[:len(s.dirty)-1]
		if h := &s.hosts[hid]; h != skip && h.dirty {
			s.kick(h)
		}
	}
}
