package fabric

// linkClass says where a link sits, for loss scopes and reports.
type linkClass uint8

const (
	linkHostUp   linkClass = iota // host NIC port → leaf
	linkHostDown                  // leaf → host NIC port
	linkFabric                    // leaf ↔ spine
	linkDirect                    // host ↔ host (back-to-back)
)

// link is one direction of a cable together with the output queue that
// feeds it. The queue is a FIFO served at the link's rate, modelled by the
// time freeAt at which everything accepted so far will have left: the bytes
// still queued at time t are (freeAt−t)/psPerByte, so a switch port needs
// no per-packet queue at all; each accepted packet is scheduled straight to
// its arrival at the far end. Times inside a link are picoseconds, so
// serialization adds no rounding error; events are rounded up to the
// nanosecond.
type link struct {
	name  string
	from  int32 // node ids: hosts are 0..H-1, switches follow
	to    int32
	plane uint8
	class linkClass

	psPerByte float64
	delayPs   int64
	buffer    int64 // queue limit in bytes; 0 = unlimited (host NIC ports, whose queue the host bounds)
	freeAt    int64 // ps

	down    bool
	mark    marker
	loss    lossState
	reverse int32 // the other direction of the cable

	// Lossless mode (topology.pfc; see pfc.go). The transmitter's side:
	// paused by the far end, and, for a switch port, the packets waiting
	// behind the one on the wire (with PFC a switch port keeps a real
	// FIFO, since a paused port holds its queue).
	pfc pfcPort

	// counters
	txPackets   uint64
	txBytes     uint64
	bufferDrops uint64
	lossDrops   uint64
	downDrops   uint64
	ceMarks     uint64
	peakQueue   int64 // bytes ahead of an arriving packet, at most
	binPeak     int64 // the same since TakeBinPeak last reset it (per-bin series)
}

// serPs is the time the link takes to serialize b bytes.
func (l *link) serPs(b int64) int64 { return int64(float64(b)*l.psPerByte + 0.5) }

// queued returns the bytes waiting (or being sent) at time nowPs.
func (l *link) queued(nowPs int64) int64 {
	if l.freeAt <= nowPs {
		return 0
	}
	return int64(float64(l.freeAt-nowPs) / l.psPerByte)
}

// enqueue offers a packet of b wire bytes to the link's queue at nowPs. It
// returns ok=false when the buffer is full (tail drop); otherwise when the
// packet's last bit reaches the far end and whether it was marked CE.
func (l *link) enqueue(nowPs, b int64, ect bool) (arrivePs int64, ce, ok bool) {
	q := l.queued(nowPs)
	if l.buffer > 0 && q+b > l.buffer {
		l.bufferDrops++
		return 0, false, false
	}
	if q > l.peakQueue {
		l.peakQueue = q
	}
	if q > l.binPeak {
		l.binPeak = q
	}
	if ect && l.mark.mark(q) {
		ce = true
		l.ceMarks++
	}
	start := max(nowPs, l.freeAt)
	l.freeAt = start + l.serPs(b)
	l.txPackets++
	l.txBytes += uint64(b)
	return l.freeAt + l.delayPs, ce, true
}

// survives decides, when a packet reaches the far end, whether it arrived:
// a link that is down drops whatever crosses it, and then the link's loss
// process has its say.
func (l *link) survives() bool {
	if l.down {
		l.downDrops++
		return false
	}
	if l.loss.lose() {
		l.lossDrops++
		return false
	}
	return true
}

// psToNs rounds a picosecond time up to the nanosecond events run at.
func psToNs(ps int64) int64 { return (ps + 999) / 1000 }
