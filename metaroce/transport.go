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
