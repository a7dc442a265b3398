package fabric

import (
	"github.com/metaroce/metaroce/verbs"
)

// Tap sees every packet one host's NIC ports send and receive (what
// --pcap writes). Fn is called inside the run, in event order.
type Tap struct {
	Host int32
	Fn   func(now verbs.Time, f Frame)
}

// Frame is a packet as a capture sees it: the transport's bytes and what
// the Ethernet, IPv4 and UDP headers around them carry.
type Frame struct {
	Payload  []byte // the transport's packet (UDP payload); valid during the call only
	SrcHost  int
	DstHost  int
	Plane    int
	SrcIP    uint32
	DstIP    uint32
	SrcPort  uint16
	DstPort  uint16
	ECT, CE  bool
	Transmit bool // sent by the captured host (else received by it)
}

func (c *Tap) packet(now verbs.Time, f *Fabric, p *packet, tx bool) {
	c.Fn(now, Frame{Payload: p.buf[:p.n], SrcHost: int(p.src), DstHost: int(p.dst), Plane: int(p.plane),
		SrcIP: HostIP(p.src, p.plane), DstIP: HostIP(p.dst, p.plane), SrcPort: p.sport, DstPort: f.dport,
		ECT: p.ect, CE: p.ce, Transmit: tx})
}
