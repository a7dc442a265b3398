package main

/*
#include <stdint.h>
#include <infiniband/verbs.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"

static inline void mrg_call_async(mrg_async_fn f, uint32_t qpn, int event)
{
	f(qpn, event);
}
*/
import "C"

import (
	"sync/atomic"
	"unsafe"

	"github.com/metaroce/metaroce/verbs"
)

// Asynchronous events, as a RoCE HCA raises them (ibv_get_async_event):
//
//   - IBV_EVENT_QP_FATAL when a QP goes to the error state because of the
//     transport and no error completion of its own says why: its session
//     failed (the peer went silent for the peer-dead timeout, reset or
//     restarted, refused or never answered the connection) or its peer
//     never connected. A QP whose own work request failed (retry or RNR
//     retry exceeded, a remote access error, ...) has that completion to
//     tell it, and an HCA raises no event for it either; nor for a QP the
//     program put in the error state or destroyed.
//   - IBV_EVENT_COMM_EST when a QP's first receive completes while it is
//     still in RTR (the C side checks the state: async.c).
//   - IBV_EVENT_DEVICE_FATAL when the engine stops (every open context).
//
// The C side queues each event on its context (mrg_async_fn); everything
// here runs on the engine goroutine, except deviceFatal.

// qpAsync is what a QP's events depend on (engine goroutine only).
type qpAsync struct {
	errSeen   bool // an error completion of its own explains its error state
	fatalSent bool // IBV_EVENT_QP_FATAL was raised
	recvSeen  bool // a receive completed (COMM_EST was offered)
}

// asyncFn is the C side's sink (MetaroceVerbsAsyncInit); nil until set.
var asyncFn atomic.Pointer[byte]

// failedSessions are the sessions whose failure was turned into events
// (engine goroutine only): a failed session is looked at once.
var failedSessions = map[verbs.Session]bool{}

// MetaroceVerbsAsyncInit gives the Go side the C side's event sink (once
// per process, at load: mrg.h).
//
//export MetaroceVerbsAsyncInit
func MetaroceVerbsAsyncInit(fn C.mrg_async_fn) C.int {
	asyncFn.Store((*byte)(unsafe.Pointer(fn)))
	return 0
}

// raise hands event for the QP numbered qpn (0: the device) to the C side.
func raise(qpn uint32, event C.int) {
	if f := asyncFn.Load(); f != nil {
		C.mrg_call_async(C.mrg_async_fn(unsafe.Pointer(f)), C.uint32_t(qpn), event)
	}
}

// noteWC looks at a completion q reports: a receive may establish the
// QP's communication, an error other than a flush explains its error
// state.
func (g *eng) noteWC(q *qp, w *C.struct_mrg_wc) {
	switch {
	case w.status == C.IBV_WC_SUCCESS:
		if !q.ev.recvSeen && (w.opcode == C.IBV_WC_RECV || w.opcode == C.IBV_WC_RECV_RDMA_WITH_IMM) {
			q.ev.recvSeen = true
			raise(q.qpn, C.IBV_EVENT_COMM_EST)
		}
	case w.status != C.IBV_WC_WR_FLUSH_ERR:
		q.ev.errSeen = true
	}
}

// qpFatal raises IBV_EVENT_QP_FATAL for q unless something else explains
// or caused its error state.
func (g *eng) qpFatal(q *qp) {
	if q.ev.errSeen || q.ev.fatalSent || q.destroyed {
		return
	}
	q.ev.fatalSent = true
	raise(q.qpn, C.IBV_EVENT_QP_FATAL)
}

// unconnected is failUnconnected's event: a QP whose peer never connected
// fails its first send with IBV_WC_RETRY_EXC_ERR when it has one, which
// tells the program; with none, only the event does.
func (g *eng) unconnected(q *qp, hasSend bool) {
	if hasSend {
		q.ev.errSeen = true
	}
	g.qpFatal(q)
}

// raiseAsync turns sessions that failed since the last step into events
// for their QPs (after the completions of this step were drained, so that
// a QP's own error completion is seen first). A step costs one
// FailReason call per session.
func (g *eng) raiseAsync() {
	for _, s := range g.sessions {
		if s.FailReason() == verbs.FailNone || failedSessions[s] {
			continue
		}
		failedSessions[s] = true
		for _, q := range g.qps {
			if q.session == s {
				g.qpFatal(q)
			}
		}
	}
}

// deviceFatal raises IBV_EVENT_DEVICE_FATAL: the engine stopped, so
// nothing the device holds makes progress any more.
func deviceFatal() {
	raise(0, C.IBV_EVENT_DEVICE_FATAL)
}
