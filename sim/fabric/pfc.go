package fabric

import (
	"github.com/metaroce/metaroce/verbs"
)

// Lossless mode (topology.pfc): PFC-style pause on every switch, one
// priority class for all traffic, as RoCEv2 deployments configure their
// fabrics.
//
// Ingress accounting: a switch counts the wire bytes it holds per ingress
// link, from the moment a packet has arrived on that link until its last
// bit has left on its output port. When a link's count reaches xoff, the
// switch sends a PAUSE to the link's sender; when the count falls to xon, a
// RESUME. Each takes effect at the sender one propagation delay of the link
// later (the pause frame itself is not serialized: it is modelled as taking
// no link time and never lost). A paused sender — a switch output port or a
// host NIC port — finishes the packet on the wire and then starts nothing
// on that link until resumed; its queue keeps filling (a host NIC port's
// queue is bounded by tx_queue, so the host stops pulling from its
// transport). Pause is held state: XOFF with the largest pause time,
// refreshed as long as needed, then XON, which is what a PFC switch sends.
//
// Headroom: after the count crosses xoff the link keeps delivering what was
// already on the wire, what the sender starts during the pause's
// propagation, and the frame it is in the middle of. So each ingress link
// may hold up to xoff + 2·(delay·rate) + 3 largest frames; a packet that
// would exceed that is dropped and counted as a PFC overflow drop, which
// the model's headroom should make impossible. Switch output buffers
// (topology.buffer) do not apply in lossless mode: the switch's buffer is
// the sum of its ingress allowances. With PFC off none of this runs and
// switch ports keep their stateless FIFO model (link.enqueue).
//
// Leaf-spine routing is up-down, so pause dependencies form no cycle and
// the fabric cannot deadlock.

// pfcPort is one link's lossless-mode state: its sender's side (the paused
// flag and a switch port's FIFO) and its receiving switch's ingress count.
type pfcPort struct {
	// Sender's side.
	paused   bool
	pausedAt verbs.Time
	pausedNs int64   // total time paused (closed intervals)
	q        pktRing // switch port: packets waiting (not the one on the wire)
	qBytes   int64   // wire bytes waiting in q
	busy     bool    // switch port: a packet is being serialized
	cur      int32   // switch port: the packet on the wire

	// Receiving switch's ingress accounting of this link.
	inBytes    int64 // wire bytes held in the switch that arrived on this link
	limit      int64 // xoff + headroom: more is an overflow drop
	xoffSent   bool  // the switch has paused this link's sender
	pauses     uint64
	overflowed uint64
}

// pktRing is a growable FIFO of packet indices.
type pktRing struct {
	buf     []int32
	head, n int
}

func (r *pktRing) push(v int32) {
	if r.n == len(r.buf) {
		nb := make([]int32, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *pktRing) pop() int32 {
	v := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

// pfcEvent is what a lossless-mode trace reports (tests only).
type pfcEvent uint8

const (
	pfcXoff    pfcEvent = iota // the switch sends PAUSE to the link's sender (bytes: its ingress count)
	pfcXon                     // the switch sends RESUME
	pfcPaused                  // the PAUSE reaches the sender
	pfcResumed                 // the RESUME reaches the sender
	pfcTx                      // the link's sender starts a packet
)

// pfcState is the run's lossless-mode configuration and trace hook.
type pfcState struct {
	on        bool
	xoff, xon int64
	// trace, when set (by tests), sees every lossless-mode event.
	trace func(at verbs.Time, ev pfcEvent, link int32, bytes int64)
}

// setupPFC turns lossless mode on for the run: every link into a switch
// gets its ingress allowance. maxFrame is the largest frame on the wire.
func (f *Fabric) setupPFC(maxFrame int64) {
	c := &f.pfcCfg
	if !c.Enabled {
		return
	}
	f.pfc = pfcState{on: true, xoff: int64(c.Xoff), xon: int64(c.Xon)}
	for i := range f.links {
		l := &f.links[i]
		if int(l.to) < len(f.hosts) {
			continue // hosts have no receive queue and never pause
		}
		inFlight := int64(float64(l.delayPs)/l.psPerByte) + 1
		l.pfc.limit = f.pfc.xoff + 2*inFlight + 3*maxFrame
	}
}

// pfcForward takes packet pi, which arrived on link in at a switch, into
// the switch: it counts against in, may pause in's sender, and joins the
// FIFO of output port out.
func (f *Fabric) pfcForward(in, out, pi int32) {
	p := f.pool.at(pi)
	b := p.wireBytes()
	il := &f.links[in]
	if il.pfc.inBytes+b > il.pfc.limit {
		il.pfc.overflowed++
		f.pool.put(pi)
		return
	}
	il.pfc.inBytes += b
	p.in = in
	if !il.pfc.xoffSent && il.pfc.inBytes >= f.pfc.xoff {
		il.pfc.xoffSent = true
		il.pfc.pauses++
		f.pfcNote(pfcXoff, in, il.pfc.inBytes)
		f.q.Push(f.q.Now()+verbs.Time(psToNs(il.delayPs)), evPause, in, 1)
	}
	ol := &f.links[out]
	nowPs := int64(f.q.Now()) * 1000
	q := ol.pfc.qBytes + ol.queued(nowPs)
	if q > ol.peakQueue {
		ol.peakQueue = q
	}
	if q > ol.binPeak {
		ol.binPeak = q
	}
	if p.ect && ol.mark.mark(q) {
		p.ce = true
		ol.ceMarks++
	}
	ol.txPackets++
	ol.txBytes += uint64(b)
	ol.pfc.q.push(pi)
	ol.pfc.qBytes += b
	if !ol.pfc.busy && !ol.pfc.paused {
		f.pfcStart(out, nowPs)
	}
}

// pfcStart puts the next packet of switch port li on the wire at atPs (or
// when the wire is free, if later).
func (f *Fabric) pfcStart(li int32, atPs int64) {
	l := &f.links[li]
	pi := l.pfc.q.pop()
	b := f.pool.at(pi).wireBytes()
	l.pfc.qBytes -= b
	l.pfc.busy, l.pfc.cur = true, pi
	l.freeAt = max(atPs, l.freeAt) + l.serPs(b)
	f.pfcNote(pfcTx, li, b)
	f.q.Push(verbs.Time(psToNs(l.freeAt)), evPortDone, li, 0)
	f.q.Push(verbs.Time(psToNs(l.freeAt+l.delayPs)), evArrive, li, pi)
}

// pfcPortDone: switch port li finished its packet, which has now left the
// switch: its ingress link's count falls (and may resume that link's
// sender), and the next packet starts unless the port is paused.
func (f *Fabric) pfcPortDone(li int32) {
	l := &f.links[li]
	l.pfc.busy = false
	p := f.pool.at(l.pfc.cur)
	il := &f.links[p.in]
	il.pfc.inBytes -= p.wireBytes()
	if il.pfc.xoffSent && il.pfc.inBytes <= f.pfc.xon {
		il.pfc.xoffSent = false
		f.pfcNote(pfcXon, p.in, il.pfc.inBytes)
		f.q.Push(f.q.Now()+verbs.Time(psToNs(il.delayPs)), evPause, p.in, 0)
	}
	if l.pfc.q.n > 0 && !l.pfc.paused {
		f.pfcStart(li, l.freeAt) // back to back: no rounding gap
	}
}

// pfcPause: a PAUSE (on) or RESUME reaches link li's sender.
func (f *Fabric) pfcPause(li int32, on bool) {
	l := &f.links[li]
	if on == l.pfc.paused {
		return
	}
	l.pfc.paused = on
	if on {
		l.pfc.pausedAt = f.q.Now()
		f.pfcNote(pfcPaused, li, 0)
		return
	}
	l.pfc.pausedNs += int64(f.q.Now() - l.pfc.pausedAt)
	f.pfcNote(pfcResumed, li, 0)
	if int(l.from) < len(f.hosts) {
		h := &f.hosts[l.from]
		pl := int(l.plane)
		if port := &h.ports[pl]; !port.busy && port.n > 0 {
			f.startTx(h, pl)
		}
		f.kick(h)
		return
	}
	if !l.pfc.busy && l.pfc.q.n > 0 {
		f.pfcStart(li, int64(f.q.Now())*1000)
	}
}

func (f *Fabric) pfcNote(ev pfcEvent, li int32, bytes int64) {
	if f.pfc.trace != nil {
		f.pfc.trace(f.q.Now(), ev, li, bytes)
	}
}

// PFCStats are the lossless-mode counters, summed over the links.
type PFCStats struct {
	Pauses, OverflowDrops uint64
	PausedNs, MaxPausedNs int64 // time links' senders spent paused: all links, and the longest one
	PausedLinks           int
}

// PFCStats sums the lossless-mode counters; ok is false when lossless
// mode is off (the run has no such figures).
func (f *Fabric) PFCStats() (st PFCStats, ok bool) {
	if !f.pfc.on {
		return st, false
	}
	for i := range f.links {
		l := &f.links[i]
		st.Pauses += l.pfc.pauses
		st.OverflowDrops += l.pfc.overflowed
		ns := l.pfc.pausedNs
		if l.pfc.paused {
			ns += int64(f.q.Now() - l.pfc.pausedAt)
		}
		st.PausedNs += ns
		st.MaxPausedNs = max(st.MaxPausedNs, ns)
		if l.pfc.pauses > 0 {
			st.PausedLinks++
		}
	}
	return st, true
}
