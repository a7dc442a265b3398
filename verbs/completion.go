package verbs

import (
	"github.com/metaroce/metaroce/internal/cqhook"
	"github.com/metaroce/metaroce/internal/queue"
)

// Status is the outcome of a work request, modelled on ibv_wc_status.
type Status uint8

const (
	StatusSuccess           Status = 0  // IBV_WC_SUCCESS
	StatusLocalLengthError  Status = 1  // IBV_WC_LOC_LEN_ERR: a SEND did not fit the posted receive
	StatusLocalProtError    Status = 2  // IBV_WC_LOC_PROT_ERR: local buffer outside its region or lkey wrong
	StatusRemoteAccessError Status = 3  // IBV_WC_REM_ACCESS_ERR: wrong rkey, out of bounds, access not granted
	StatusRemoteOpError     Status = 4  // IBV_WC_REM_OP_ERR: the responder could not complete the operation
	StatusRetryExceeded     Status = 5  // IBV_WC_RETRY_EXC_ERR: the peer stopped answering
	StatusRNRRetryExceeded  Status = 6  // IBV_WC_RNR_RETRY_EXC_ERR: no receive posted after all retries
	StatusFlushed           Status = 7  // IBV_WC_WR_FLUSH_ERR: the queue pair was destroyed, closed or failed first
	StatusRemoteInvalidReq  Status = 8  // IBV_WC_REM_INV_REQ_ERR: the peer found the request malformed
	StatusReceiverNotReady  Status = 9  // wire-only: RNR NAK (never reported in a completion)
	StatusLocalAccessError  Status = 10 // IBV_WC_LOC_ACCESS_ERR: a WRITE_IMM's target was refused; its receive completes with this
)

func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "success"
	case StatusLocalLengthError:
		return "local length error"
	case StatusLocalProtError:
		return "local protection error"
	case StatusRemoteAccessError:
		return "remote access error"
	case StatusRemoteOpError:
		return "remote operation error"
	case StatusRetryExceeded:
		return "retry exceeded"
	case StatusRNRRetryExceeded:
		return "RNR retry exceeded"
	case StatusFlushed:
		return "flushed"
	case StatusRemoteInvalidReq:
		return "remote invalid request"
	case StatusReceiverNotReady:
		return "receiver not ready"
	case StatusLocalAccessError:
		return "local access error"
	}
	return "unknown status"
}

// WCOpcode says which operation a work completion reports.
type WCOpcode uint8

const (
	WCSend         WCOpcode = iota // a SEND or SEND_IMM finished at the sender
	WCWrite                        // a WRITE or WRITE_IMM finished at the sender
	WCRead                         // a READ finished at the requester
	WCRecv                         // a receive consumed by a SEND or SEND_IMM
	WCRecvWriteImm                 // a receive consumed by a WRITE_IMM
)

// WorkCompletion reports one finished work request (ibv_wc).
type WorkCompletion struct {
	WRID    uint64
	Status  Status
	Opcode  WCOpcode
	ByteLen uint32 // bytes received (receive side) or transferred
	Imm     uint32
	HasImm  bool
	QPN     QPN // the queue pair the work request was posted on (QP.QPN)
}

// CompletionQueue is a polled queue of work completions (ibv_cq). It grows
// as needed; it never drops a completion. Every transport core reports into
// this one type, so an application polls both alike.
//
// Only transport cores add completions: push is unexported and reaches the
// cores through internal/cqhook (installed below), so an application can
// Poll a queue but never forge a completion in it.
type CompletionQueue struct {
	q queue.Ring[WorkCompletion]
	// onReady and flagged: see OnReady.
	onReady func()
	flagged bool
}

// OnReady sets f to be called at the first push after Poll last left the
// queue empty (and at the first push ever), so that an owner of many
// queues finds the ones with completions without polling each. f runs on
// the goroutine that runs the transport core, inside the push; it must
// not push or poll. A queue that is never drained to empty calls f once.
func (q *CompletionQueue) OnReady(f func()) { q.onReady = f }

// PushFunc is the type of the function transport cores fetch with
// cqhook.Push[verbs.PushFunc]() to report a completion into a queue.
type PushFunc = func(*CompletionQueue, WorkCompletion)

func init() { cqhook.Install(PushFunc((*CompletionQueue).push)) }

// NewCompletionQueue returns a queue with room for depth completions before
// it has to grow.
func NewCompletionQueue(depth int) *CompletionQueue {
	return &CompletionQueue{q: queue.NewRing[WorkCompletion](max(depth, 16))}
}

// Poll moves up to len(out) completions into out and returns how many.
func (q *CompletionQueue) Poll(out []WorkCompletion) int {
	k := 0
	for k < len(out) && q.q.Len() > 0 {
		out[k] = *q.q.Front() // no pointers in it: the slot needs no clearing
		q.q.Drop()
		k++
	}
	if q.q.Len() == 0 {
		q.flagged = false
	}
	return k
}

// Len returns the number of completions waiting.
func (q *CompletionQueue) Len() int { return q.q.Len() }

// push appends a completion (see the type's comment for who may).
//
// It fills the new slot field by field: a WorkCompletion has seven fields,
// too many for registers, so pushing the value would spill it with narrow
// stores and copy it into the ring with wide loads that stall on them,
// once per completion (one per message: per packet at 64 bytes). WorkCompletion
// holds no pointers, so the slot left over from earlier needs no clearing.
func (q *CompletionQueue) push(wc WorkCompletion) {
	s := q.q.Extend()
	s.WRID, s.Status, s.Opcode, s.ByteLen = wc.WRID, wc.Status, wc.Opcode, wc.ByteLen
	s.Imm, s.HasImm, s.QPN = wc.Imm, wc.HasImm, wc.QPN
	if !q.flagged {
		q.flagged = true
		if q.onReady != nil {
			q.onReady()
		}
	}
}
