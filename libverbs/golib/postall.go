package main

/*
#include <errno.h>
#include <stdint.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"
*/
import "C"

import "unsafe"

// MetaroceVerbsPostSendAll queues the n send work requests of one
// ibv_wr_complete batch (qp_ex.c): all of them, or none when the send
// queue has no room for the whole batch (ENOMEM), as a provider rolls its
// batch back. One crossing per batch; the engine posts them at its next
// iteration, on this thread if the loop sleeps, or at the next empty poll
// of this thread or of the driving one (kickSend), exactly as
// MetaroceVerbsPostSend's.
//
//export MetaroceVerbsPostSendAll
func MetaroceVerbsPostSendAll(h C.uint32_t, wr *C.struct_mrg_send_wr, n, lazy C.int, deferred *C.int) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	*deferred = 0
	if n <= 0 {
		return 0
	}
	g.mu.Lock()
	q := g.qps[uint32(h)]
	if q == nil || q.destroyed {
		g.mu.Unlock()
		return C.EINVAL
	}
	if int(n) > q.sqDepth-int(q.outstanding.Load()) {
		g.mu.Unlock()
		return C.ENOMEM
	}
	q.pendSend = append(q.pendSend, unsafe.Slice(wr, int(n))...)
	q.outstanding.Add(int64(n))
	g.markPosted(q)
	g.mu.Unlock()
	if g.kickSend(lazy != 0) {
		*deferred = 1
	}
	return 0
}
