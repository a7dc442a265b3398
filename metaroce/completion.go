package metaroce

import (
	"github.com/metaroce/metaroce/internal/cqhook"
	"github.com/metaroce/metaroce/verbs"
)

// nakable reports whether a NAK may carry s.
func nakable(s verbs.Status) bool {
	switch s {
	case verbs.StatusLocalLengthError, verbs.StatusRemoteAccessError, verbs.StatusRemoteOpError,
		verbs.StatusRemoteInvalidReq, verbs.StatusReceiverNotReady:
		return true
	}
	return false
}

// pushWC reports a completion into a verbs completion queue (see
// internal/cqhook: only transport cores can).
var pushWC = cqhook.Push[verbs.PushFunc]()
