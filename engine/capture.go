package engine

// Capture, when set on a Backend, sees every packet sent and every packet
// received (after the impairment stage, before the transport), with the
// addresses, ports and ECN field it had on the wire. It runs on the
// backend's loop goroutine; p.Payload is valid only during the call. ts
// is nanoseconds since the Unix epoch.
type Capture func(ts int64, p Packet)

// Packet describes one datagram for a Capture.
type Packet struct {
	Sent             bool
	SrcIP, DstIP     [4]byte
	SrcPort, DstPort uint16
	DSCP, ECN        uint8
	Payload          []byte
}
