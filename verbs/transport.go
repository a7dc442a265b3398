package verbs

// Transport is the sans-I/O packet interface a backend drives: the
// simulator's hosts, the UDP-socket loop and the DPDK engine shards all run
// a transport core through these five calls and nothing else. Every
// transport core (metaroce, the RoCEv2 baseline) implements it, so a
// backend runs either one unchanged.
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

// RxMeta is what the backend knows about a received packet.
type RxMeta struct {
	Peer  PeerHandle // the backend's name for the sender
	Plane PlaneID    // port / plane it arrived on
	CE    bool       // the IP header carried ECN Congestion Experienced
}

// TxMeta is what a transport tells the backend about a packet it wrote.
//
// Its fields are grouped so that no struct has more than four (TxRoute is
// embedded: meta.Entropy and the others read as before). The Go compiler
// keeps a struct of at most four fields in registers; a larger one lives
// in memory, written field by field and then copied as a whole at every
// call that returns it, and each such copy waits for the narrow stores
// before it (a store-to-load forwarding stall). TxMeta goes through
// several calls per packet (BenchmarkPacketPath).
type TxMeta struct {
	Len  int        // bytes written to the caller's buffer
	Peer PeerHandle // destination endpoint
	TxRoute
}

// TxRoute is how a packet leaves: its path, and what the backend makes of
// it on the wire.
type TxRoute struct {
	Path    PathID
	Entropy Entropy // UDP source port to use
	Plane   PlaneID // NIC port / fabric plane to send on
	// ECT asks the backend to send the packet ECN-capable, codepoint
	// ECT(0), so switches mark it instead of dropping it.
	ECT bool
}
