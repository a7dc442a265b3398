package fabric

// packet is one frame on the fabric. Its bytes are the transport's packet
// (the UDP payload); the fields beside it are what the Ethernet, IP and UDP
// headers would carry and what the model needs to route and account it.
type packet struct {
	buf   []byte // len(buf) = pool buffer size; the packet is buf[:n]
	n     int32
	src   int32  // sending host
	dst   int32  // destination host
	sport uint16 // UDP source port = the transport's path entropy
	plane uint8
	in    int32 // lossless mode: the link it arrived on at the switch that holds it
	ce    bool  // IP ECN field is CE (a switch marked it)
	ect   bool  // IP ECN field is ECN-capable
}

// wireOverhead is what a frame adds on the wire to the transport's packet:
// Ethernet header 14 + FCS 4, IPv4 20, UDP 8, and the preamble (8) and
// minimum inter-frame gap (12) that occupy the link between frames.
const wireOverhead = 14 + 4 + 20 + 8 + 8 + 12

// wireBytes is the link time a packet occupies, in bytes.
func (p *packet) wireBytes() int64 { return int64(p.n) + wireOverhead }

// packetPool recycles packets and their buffers: the run refers to a
// packet by its index, and a delivered or dropped packet goes back on the
// free list, so forwarding allocates nothing once the pool has grown to the
// number of packets in flight.
type packetPool struct {
	pkts   []packet
	free   []int32
	bufLen int
	inUse  int
	peak   int
}

func newPacketPool(bufLen int) packetPool { return packetPool{bufLen: bufLen} }

// get returns a free packet's index; its fields other than buf are stale.
func (pp *packetPool) get() int32 {
	pp.inUse++
	if pp.inUse > pp.peak {
		pp.peak = pp.inUse
	}
	if n := len(pp.free); n > 0 {
		i := pp.free[n-1]
		pp.free = pp.free[:n-1]
		return i
	}
	pp.pkts = append(pp.pkts, packet{buf: make([]byte, pp.bufLen)})
	return int32(len(pp.pkts) - 1)
}

// put returns packet i to the pool.
func (pp *packetPool) put(i int32) {
	pp.inUse--
	pp.free = append(pp.free, i)
}

func (pp *packetPool) at(i int32) *packet { return &pp.pkts[i] }
