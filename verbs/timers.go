package verbs

import "time"

// QPTimers are a queue pair's transport budgets as ibv_modify_qp sets them
// (min_rnr_timer at RTR; timeout, retry_cnt and rnr_retry at RTS), in the
// IBA's codes. A QP given them is held to them instead of its endpoint's
// configured budgets; the zero value is a valid setting (no ACK timeout,
// no RNR retry), not "unset": a QP without them has QPAttr.Timers nil.
type QPTimers struct {
	// Timeout is the local ACK timeout code: 4.096 µs × 2^Timeout
	// (1..31); 0 means infinite (the QP never gives up for want of ACKs).
	Timeout uint8
	// RetryCnt (0..7) is how often the requester retries after an ACK
	// timeout: with Timeout, the QP's work fails with StatusRetryExceeded
	// after NoAckLimit without an acknowledgement.
	RetryCnt uint8
	// RNRRetry is how often a message is retried after receiver-not-ready
	// (0..6); 7 retries without limit.
	RNRRetry uint8
	// MinRNRTimer is the RNR NAK timer code (IBA Table 45) this QP's
	// responder asks its peer to wait before retrying.
	MinRNRTimer uint8
}

// RNRForever is the RNRRetry code that retries without limit.
const RNRForever = 7

// NoAckLimit is how long the QP's oldest outstanding work may go without
// an acknowledgement before it fails: the ACK timeout times the
// transmissions it allows (RetryCnt + 1). 0 means no limit.
func (t QPTimers) NoAckLimit() time.Duration {
	return AckTimeout(t.Timeout) * time.Duration(min(t.RetryCnt, 7)+1)
}

// RNRRetries is how often a message may be retried after an RNR NAK, or -1
// for without limit.
func (t QPTimers) RNRRetries() int {
	if t.RNRRetry >= RNRForever {
		return -1
	}
	return int(t.RNRRetry)
}

// AckTimeout returns the local ACK timeout of an IB timeout code:
// 4.096 µs × 2^code (IBA 9.7.6.1.3). Code 0 means "infinite" and returns 0,
// and so does any code above 31.
func AckTimeout(code uint8) time.Duration {
	if code == 0 || code > 31 {
		return 0
	}
	return 4096 * time.Nanosecond << code
}

// rnrTimerTable is IBA Table 45: the RNR NAK timer field's code to time.
// Code 0 is the longest (655.36 ms).
var rnrTimerTable = [32]time.Duration{
	655360 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond,
	40 * time.Microsecond, 60 * time.Microsecond, 80 * time.Microsecond, 120 * time.Microsecond,
	160 * time.Microsecond, 240 * time.Microsecond, 320 * time.Microsecond, 480 * time.Microsecond,
	640 * time.Microsecond, 960 * time.Microsecond, 1280 * time.Microsecond, 1920 * time.Microsecond,
	2560 * time.Microsecond, 3840 * time.Microsecond, 5120 * time.Microsecond, 7680 * time.Microsecond,
	10240 * time.Microsecond, 15360 * time.Microsecond, 20480 * time.Microsecond, 30720 * time.Microsecond,
	40960 * time.Microsecond, 61440 * time.Microsecond, 81920 * time.Microsecond, 122880 * time.Microsecond,
	163840 * time.Microsecond, 245760 * time.Microsecond, 327680 * time.Microsecond, 491520 * time.Microsecond,
}

// RNRTimer returns the time an RNR NAK timer code (0..31) stands for.
func RNRTimer(code uint8) time.Duration { return rnrTimerTable[code&0x1F] }
