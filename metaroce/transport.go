package metaroce

// Transport is the sans-I/O packet interface a backend drives: the
// simulator's hosts, the UDP-socket loop and the DPDK engine shards all run
// a transport core through these five calls and nothing else. Endpoint
// implements it, and so does every other transport core (the RoCEv2
// baseline), so a backend runs either one unchanged.
//
// Contract, for every implementation: calls come from one goroutine; Receive
// only reads pkt, during the call; NextPacket writes at most MaxPacketLen
// bytes into buf and keeps no reference to it; NextPacket returns false when
// nothing may be sent at now (nothing to send, windows full, or pacing), in
// which case a new packet, a Receive or the clock reaching NextDeadline is
// what can change that; OnTimer(now) must be called once the clock reaches
// NextDeadline, and leaves NextDeadline in the future.
type Transport interface {
	Receive(now Time, pkt []byte, rx RxMeta)
	NextPacket(now Time, buf []byte) (TxMeta, bool)
	NextDeadline() Time
	OnTimer(now Time)
	MaxPacketLen() int
}

var _ Transport = (*Endpoint)(nil)

// PlaneSteering is an optional extension of Transport for backends with
// several NIC ports (planes). Before asking for packets, such a backend
// says which ports can take one now (bit k set: port k has room in its TX
// queue); new data then goes to those planes first, so a port that backs
// up does not hold packets behind it while the others idle (the core is
// otherwise blind to its ports' backpressure). Mask 0 means "no
// information": every plane is treated as ready. Same goroutine as the
// other calls.
type PlaneSteering interface {
	SetReadyPlanes(mask uint32)
}

var _ PlaneSteering = (*Endpoint)(nil)
