package verbs

// WROpcode is the operation of a send work request.
type WROpcode uint8

const (
	WRWrite    WROpcode = iota // RDMA WRITE
	WRWriteImm                 // RDMA WRITE with immediate: also consumes a receive at the peer
	WRSend                     // SEND into the peer's next posted receive
	WRSendImm                  // SEND with immediate
	WRRead                     // RDMA READ from the peer into Local
)

// SendWR is a send-queue work request (ibv_send_wr with one SGE).
type SendWR struct {
	ID         uint64
	Opcode     WROpcode
	Local      SGE    // source (WRITE/SEND) or destination (READ)
	RemoteAddr uint64 // WRITE*/READ
	RKey       RKey   // WRITE*/READ
	Imm        uint32 // *_IMM
}

// RecvWR is a receive-queue work request (ibv_recv_wr with one SGE).
type RecvWR struct {
	ID    uint64
	Local SGE
}

// QPAttr configures a queue pair (ibv_qp_init_attr): its protection domain,
// which must be one of the device's, and the queues its send and receive
// completions go to (nil: that side's completions are dropped), and the
// transport budgets it is held to (nil: the endpoint's configured ones).
type QPAttr struct {
	PD     *ProtectionDomain
	SendCQ *CompletionQueue
	RecvCQ *CompletionQueue
	Timers *QPTimers
}
