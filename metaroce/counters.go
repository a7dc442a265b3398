package metaroce

// PathCounters count one path's traffic. They are plain fields: only the
// endpoint's owner goroutine writes them, and it may read them at any time
// without locks (other goroutines need a copy handed over by the owner).
type PathCounters struct {
	TxPackets           uint64 // sequenced packets sent, first transmissions and resends
	TxBytes             uint64 // payload bytes sent
	RxPackets           uint64 // sequenced packets accepted (not duplicates)
	RxBytes             uint64 // payload bytes placed
	RetransmitSACK      uint64 // packets resent because a SACK showed a gap
	RetransmitTimeout   uint64 // packets resent by the tail-loss timer
	Probes              uint64 // NOP tail probes sent
	SackGaps            uint64 // missing PSNs detected from SACK bitmaps
	ECNEchoes           uint64 // CE marks the peer echoed for this path
	CEReceived          uint64 // CE-marked packets received on this path
	Failures            uint64 // times the path was judged failed
	MovedAway           uint64 // packets moved to other paths after a failure
	Restores            uint64 // times a failed path came back after a re-probe
	Rerolls             uint64 // times the path took a new entropy (persistent congestion)
	DuplicatesReceived  uint64 // sequenced packets received twice
	OutOfWindowReceived uint64 // sequenced packets too far ahead to track
	StaleGeneration     uint64 // packets of an old path generation
	GenerationsRefused  uint64 // packets of a newer generation not adopted (generation.go), or without its proof (genproof.go)
	// SpuriousTimeouts: tail-loss timeouts of this path proven spurious
	// afterwards (an ACK echoed a transmission made before the timeout:
	// the packets were late, not lost): what Conn.patience is for.
	SpuriousTimeouts uint64
}

// ConnCounters count one connection's traffic and errors.
type ConnCounters struct {
	TxPackets         uint64 // every packet sent, control included
	TxBytes           uint64 // every byte sent (whole packets)
	RxPackets         uint64 // every valid packet received
	RxBytes           uint64
	DataPacketsSent   uint64 // data-carrying packets (WRITE*, SEND*, READ_RESP), first sends
	DataResent        uint64 // data-carrying packets resent (any cause)
	PayloadPlaced     uint64 // payload bytes placed in memory, each byte of a message once
	TxCoalesced       uint64 // packets sent as follow-ons in another's datagram (coalesce.go)
	DuplicateChunks   uint64 // copies of an already-placed chunk that arrived on a new PSN (moved or resent), acknowledged but not placed again
	CopiesCancelled   uint64 // moved copies not sent: the original's ACK came first
	LastChunksHeld    uint64 // WRITE last chunks that came before the rest and waited to be placed last
	LastChunksRefused uint64 // the same, not acknowledged: maxHeldChunks were already held
	AcksSent          uint64
	AcksReceived      uint64
	AckBlocksReceived uint64
	NaksSent          uint64
	NaksReceived      uint64
	RNRNaksSent       uint64
	RNRRetries        uint64
	QPAckTimeouts     uint64 // QPs whose work went their QPTimers.NoAckLimit unacknowledged (qptimers.go)
	Retransmits       uint64 // sequenced packets resent (SACK + timeout), data and NOPs
	SackGaps          uint64
	ECNEchoes         uint64
	CRCDrops          uint64 // packets naming this connection whose CRC failed (attribution from an unverified header)
	AccessViolations  uint64 // WRITE/READ refused: key, bounds, access, protection domain
	LengthErrors      uint64
	Malformed         uint64 // well-formed CRC but inconsistent fields
	Duplicates        uint64
	StalePackets      uint64 // wrong incarnation or source connection
	BadTags           uint64 // packets whose proof of our token failed: an unsequenced one's tag (token.go), a new generation's proof (genproof.go)
	AmplificationHeld uint64 // times a packet to the unproven peer waited for its budget (amplification.go)
	OutOfWindow       uint64 // sequenced packets on an unproven connection outside its first windows (generation.go)
	PathFailures      uint64
	PathRerolls       uint64
	SpuriousTimeouts  uint64 // tail-loss timeouts proven spurious (PathCounters.SpuriousTimeouts)
	MessagesSent      uint64
	MessagesReceived  uint64
	// The sealed modes (seal.go): packets naming this connection whose
	// tag did not check, replays of a packet number seen before (inside
	// the replay window) or older than the window, and key epochs moved
	// to (both directions).
	AuthFailures uint64
	Replays      uint64
	ReplaysOld   uint64
	KeyUpdates   uint64
}

// EndpointCounters count what arrives at the endpoint before a connection
// is found.
type EndpointCounters struct {
	RxPackets       uint64
	RxCoalesced     uint64 // well-formed coalesced datagrams (their packets count in RxPackets)
	CRCDrops        uint64
	Malformed       uint64 // undecodable header or extension
	UnknownConn     uint64
	ResetsSent      uint64
	ResetsLimited   uint64 // RESETs not sent: over the rate limit (Config.ResetRate)
	ConnectsRefused uint64 // CONNECTs answered with a refusal (the sum of the Refused* reasons below)
	RefusedMaxConns uint64 // ... because the endpoint holds MaxConns connections
	RefusedPerPeer  uint64 // ... because the address holds MaxConnsPerPeer inbound connections
	RefusedBacklog  uint64 // ... because AcceptBacklog connections wait for Accept
	// RefusedNotAccepting: ... because Config.AcceptIncoming is off.
	RefusedNotAccepting uint64
	HalfOpenEvicted     uint64 // unproven inbound connections dropped to make room (MaxHalfOpen)
	PeerRestarts        uint64 // connections failed because the peer came back with a new incarnation
	// AuthFailures: CONNECTs, RESETs and CLOSE_ACKs whose PSK MAC did not
	// check (sealed modes, seal.go); SealMismatch: packets whose seal
	// flags disagree with the endpoint's mode (a CRC packet to a sealed
	// endpoint, a sealed one to mode none, auth to encrypt).
	AuthFailures uint64
	SealMismatch uint64
}
