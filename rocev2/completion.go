package rocev2

import mr "github.com/metaroce/metaroce/metaroce"

// Work requests, completions and their codes are metaroce's types.
// WorkCompletion.Conn is the local QP number; Stream is always 0.
type (
	WROpcode       = mr.WROpcode
	SendWR         = mr.SendWR
	RecvWR         = mr.RecvWR
	WorkCompletion = mr.WorkCompletion
	WCOpcode       = mr.WCOpcode
	Status         = mr.Status
)

// CompletionQueue is a polled queue of work completions (ibv_cq) with the
// same Poll and Len as metaroce's. It grows as needed and never drops a
// completion. (It is rocev2's own type because metaroce's push is not
// exported.)
type CompletionQueue struct {
	ring []WorkCompletion
	head int
	n    int
}

// NewCompletionQueue returns a queue with room for depth completions before
// it has to grow.
func NewCompletionQueue(depth int) *CompletionQueue {
	if depth < 16 {
		depth = 16
	}
	return &CompletionQueue{ring: make([]WorkCompletion, depth)}
}

// Poll moves up to len(out) completions into out and returns how many.
func (q *CompletionQueue) Poll(out []WorkCompletion) int {
	k := 0
	for k < len(out) && q.n > 0 {
		out[k] = q.ring[q.head]
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		k++
	}
	return k
}

// Len returns the number of completions waiting.
func (q *CompletionQueue) Len() int { return q.n }

func (q *CompletionQueue) push(wc WorkCompletion) {
	if q.n == len(q.ring) {
		grown := make([]WorkCompletion, 2*len(q.ring))
		for i := 0; i < q.n; i++ {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = wc
	q.n++
}

// Completion statuses (metaroce's).
const (
	StatusSuccess           = mr.StatusSuccess
	StatusLocalLengthError  = mr.StatusLocalLengthError
	StatusRemoteAccessError = mr.StatusRemoteAccessError
	StatusRemoteOpError     = mr.StatusRemoteOpError
	StatusRetryExceeded     = mr.StatusRetryExceeded
	StatusRNRRetryExceeded  = mr.StatusRNRRetryExceeded
	StatusFlushed           = mr.StatusFlushed
	StatusRemoteInvalidReq  = mr.StatusRemoteInvalidReq
)
