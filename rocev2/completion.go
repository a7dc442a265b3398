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

// CompletionQueue is metaroce's completion queue: both transports report
// into the same type.
type CompletionQueue = mr.CompletionQueue

// NewCompletionQueue returns a queue with room for depth completions before
// it has to grow.
func NewCompletionQueue(depth int) *CompletionQueue { return mr.NewCompletionQueue(depth) }

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
