package rocev2

// ConnCounters count one QP's traffic and errors. They are plain fields:
// only the endpoint's owner goroutine writes them, and it may read them at
// any time (other goroutines need a copy handed over by the owner).
type ConnCounters struct {
	TxPackets uint64 // every packet sent on the QP, CM included
	TxBytes   uint64 // UDP payload bytes sent
	RxPackets uint64 // packets received whose ICRC checked
	RxBytes   uint64

	// Requester.
	DataPacketsSent    uint64 // request packets sent for the first time (SEND, WRITE, READ request)
	DataResent         uint64 // request packets sent again (go-back-N, timeout)
	AcksReceived       uint64 // ACK packets (syndrome ACK)
	NaksReceived       uint64 // PSN sequence error NAKs
	DuplicateNaks      uint64 // sequence NAKs for a PSN already NAKed (ignored)
	RNRNaksReceived    uint64
	ErrorNaksReceived  uint64 // remote access, invalid request, operational error
	Timeouts           uint64 // local ACK timeouts
	Retries            uint64 // go-back-N episodes (timeout, NAK, missing READ response)
	ReadResponses      uint64 // READ response packets placed
	DuplicateResponses uint64 // READ responses for PSNs already complete
	StaleAcks          uint64 // ACKs/NAKs for PSNs outside the outstanding range

	// Responder.
	AcksSent          uint64
	NaksSent          uint64 // PSN sequence error NAKs (one per gap episode)
	RNRNaksSent       uint64
	ErrorNaksSent     uint64
	OutOfSequence     uint64 // requests dropped because an earlier PSN is missing
	Duplicates        uint64 // requests with a PSN already executed (acknowledged, not re-executed)
	DuplicateReads    uint64 // READ requests re-executed
	ReadResponsesSent uint64
	PayloadPlaced     uint64 // bytes written into registered memory (both roles)
	AccessErrors      uint64 // requests refused: rkey, bounds, access, protection domain
	InvalidRequests   uint64 // opcode sequence or length errors

	// Both.
	ICRCDrops        uint64
	Malformed        uint64 // valid ICRC, inconsistent contents
	MessagesSent     uint64 // send work requests completed successfully
	MessagesReceived uint64 // receives completed successfully

	// DCQCN.
	CEReceived   uint64 // CE-marked packets received (notification point)
	CNPsSent     uint64
	CNPsReceived uint64
	RateCuts     uint64
	RateIncrease uint64 // rate-increase events
}

// EndpointCounters count what arrives before a QP is found, and the
// connection manager.
type EndpointCounters struct {
	RxPackets     uint64
	Malformed     uint64 // undecodable packets
	UnknownQP     uint64 // destination QP not open: silently dropped, as NICs do
	ICRCDrops     uint64 // ICRC mismatch (CM packets; QP packets count at the QP too)
	CMReceived    uint64
	CMSent        uint64
	CMRejectsSent uint64
	// REQs refused (each answered with a REJ, unless the bounded reply
	// queue was full), by reason: RefusedMaxQPs, the endpoint holds MaxQPs
	// QPs (REJ No QP); RefusedNotAccepting, Config.AcceptIncoming is off
	// (REJ Consumer Reject).
	RefusedMaxQPs       uint64
	RefusedNotAccepting uint64
}
