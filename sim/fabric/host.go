package fabric

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
func (f *Fabric) canPull(h *host) bool {
	some := false
	for i := range h.ports {
		n := h.ports[i].n
		if n >= len(h.ports[i].q) {
			return false
		}
		if n < f.txQueue {
			some = true
		}
	}
	return some
}

// kick moves packets from h's transport into its NIC ports while they
// have room, starts idle ports, and re-arms h's timer. Every event that
// touches a host's transport ends with it.
func (f *Fabric) kick(h *host) {
	h.dirty = false
	steer, _ := h.tr.(verbs.PlaneSteering)
	for f.canPull(h) {
		if steer != nil && len(h.ports) > 1 {
			// Tell the transport which NIC ports have room, as a NIC
			// driver's per-queue TX state would.
			var mask uint32
			for i := range h.ports {
				if h.ports[i].n < f.txQueue {
					mask |= 1 << i
				}
			}
			steer.SetReadyPlanes(mask)
		}
		pi := f.pool.get()
		p := f.pool.at(pi)
		meta, ok := h.tr.NextPacket(f.q.Now(), p.buf)
		if !ok {
			f.pool.put(pi)
			break
		}
		if int(meta.Peer) >= len(f.hosts) || meta.Len <= 0 || meta.Len > len(p.buf) {
			f.badPackets++
			f.pool.put(pi)
			continue
		}
		p.n = int32(meta.Len)
		p.src, p.dst = h.id, int32(meta.Peer)
		p.sport, p.plane = uint16(meta.Entropy), uint8(int(meta.Plane)%len(h.ports))
		p.ce, p.ect = false, true
		f.hostTx++
		if f.tap != nil && f.tap.Host == h.id {
			f.tap.packet(f.q.Now(), f, p, true)
		}
		port := &h.ports[p.plane]
		port.push(pi)
		h.queued++
		if !port.busy && !f.links[port.link].pfc.paused {
			f.startTx(h, int(p.plane))
		}
	}
	f.arm(h)
}

// startTx puts the next packet of port pi on the wire.
func (f *Fabric) startTx(h *host, pi int) {
	port := &h.ports[pi]
	pk := port.pop()
	h.queued--
	port.busy = true
	l := &f.links[port.link]
	b := f.pool.at(pk).wireBytes()
	f.pfcNote(pfcTx, port.link, b)
	arrive, _, _ := l.enqueue(int64(f.q.Now())*1000, b, false)
	f.q.Push(verbs.Time(psToNs(l.freeAt)), evTxDone, h.id*int32(f.planes)+int32(pi), 0)
	f.q.Push(verbs.Time(psToNs(arrive)), evArrive, port.link, pk)
}

// txDone: port gp (host·planes+plane) finished a packet.
func (f *Fabric) txDone(gp int32) {
	h := &f.hosts[gp/int32(f.planes)]
	pi := int(gp % int32(f.planes))
	port := &h.ports[pi]
	port.busy = false
	if port.n > 0 && !f.links[port.link].pfc.paused {
		f.startTx(h, pi)
	}
	f.kick(h)
}

// arm makes sure an event is scheduled for h's transport deadline: only
// an earlier deadline schedules a new event; when an early event fires and
// finds the deadline moved later, onTimer re-arms for the new one.
func (f *Fabric) arm(h *host) {
	d := h.tr.NextDeadline()
	if d >= h.timerAt {
		return
	}
	at := max(d, f.q.Now())
	if at == h.firedAt {
		// The transport asks for OnTimer again at the instant it just ran,
		// against the contract (OnTimer leaves NextDeadline in the
		// future): move on by a nanosecond rather than spin forever.
		at++
		f.timerSpins++
	}
	h.timerGen++
	h.timerAt = d
	f.q.Push(at, evTimer, h.id, h.timerGen)
}

func (f *Fabric) onTimer(hid, gen int32) {
	h := &f.hosts[hid]
	if gen != h.timerGen {
		return // superseded by an earlier deadline
	}
	h.timerAt = verbs.Never
	if h.tr.NextDeadline() <= f.q.Now() {
		h.firedAt = f.q.Now()
		h.tr.OnTimer(f.q.Now())
		f.poll(h)
	}
	f.kick(h)
}

// deliver hands packet pi to its destination host.
func (f *Fabric) deliver(pi int32) {
	p := f.pool.at(pi)
	h := &f.hosts[p.dst]
	if f.tap != nil && f.tap.Host == h.id {
		f.tap.packet(f.q.Now(), f, p, false)
	}
	f.hostRx++
	h.tr.Receive(f.q.Now(), p.buf[:p.n], verbs.RxMeta{Peer: verbs.PeerHandle(p.src), Plane: verbs.PlaneID(p.plane), CE: p.ce})
	f.pool.put(pi)
	f.poll(h)
	f.kick(h)
}

// poll gives h's application its turn (it takes h's completions and may
// post work); hosts it posted work on are kicked right after (the
// application's posts happen between transport calls, never inside one).
func (f *Fabric) poll(h *host) {
	f.app(int(h.id))
	f.flushDirty(h)
}

// Posted marks host hid as having new work to send: it is kicked once the
// current event is done with the transports.
func (f *Fabric) Posted(hid int) {
	h := &f.hosts[hid]
	if !h.dirty {
		h.dirty = true
		f.dirty = append(f.dirty, int32(hid))
	}
}

// FlushDirty kicks every host with new work (Posted): the application,
// having posted outside any poll, lets them send.
func (f *Fabric) FlushDirty() { f.flushDirty(nil) }

// flushDirty kicks every host with new work except skip, which the caller
// kicks itself.
func (f *Fabric) flushDirty(skip *host) {
	for len(f.dirty) > 0 {
		hid := f.dirty[len(f.dirty)-1]
		f.dirty = f.dirty[:len(f.dirty)-1]
		if h := &f.hosts[hid]; h != skip && h.dirty {
			f.kick(h)
		}
	}
}
