package main

/*
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#cgo CFLAGS: -I${SRCDIR}/../../cgo
#include "mrg.h"
*/
import "C"

import (
	"errors"
	"net/netip"
	"unsafe"

	"github.com/metaroce/metaroce/verbs"
)

// The calls of mrg.h's MRG_API: each runs on the C thread that called it,
// and whatever touches the core is queued to the engine goroutine.

//export MetaroceVerbsAllocPD
func MetaroceVerbsAllocPD(pd *C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(verbs.Time) error {
		h := g.handle()
		g.pds[h] = g.dev.AllocPD()
		*pd = C.uint32_t(h)
		return nil
	}))
}

//export MetaroceVerbsDeallocPD
func MetaroceVerbsDeallocPD(pd C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(verbs.Time) error {
		p := g.pds[uint32(pd)]
		if p == nil {
			return errInval
		}
		for _, m := range g.mrs {
			if m.PD() == p {
				return errBusy
			}
		}
		for _, q := range g.qps {
			if q.pd == p {
				return errBusy
			}
		}
		delete(g.pds, uint32(pd))
		return nil
	}))
}

var (
	errInval = errors.New("EINVAL")
	errBusy  = errors.New("EBUSY")
	errNoMem = errors.New("ENOMEM")
)

// errno maps an error to the errno value a verbs call returns.
func errno(err error) C.int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errBusy):
		return C.EBUSY
	case errors.Is(err, errNoMem), errors.Is(err, verbs.ErrTooManyMRs):
		return C.ENOMEM
	}
	return C.EINVAL
}

//export MetaroceVerbsRegMR
func MetaroceVerbsRegMR(pd C.uint32_t, addr unsafe.Pointer, length, iova C.uint64_t, access C.int,
	handle, lkey, rkey *C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	var acc verbs.Access
	if access&C.IBV_ACCESS_LOCAL_WRITE != 0 {
		acc |= verbs.AccessLocalWrite
	}
	if access&C.IBV_ACCESS_REMOTE_WRITE != 0 {
		acc |= verbs.AccessRemoteWrite
	}
	if access&C.IBV_ACCESS_REMOTE_READ != 0 {
		acc |= verbs.AccessRemoteRead
	}
	if uint64(length) > verbs.MaxRegionLen {
		return C.EINVAL
	}
	// The program's memory, as a slice: C memory, never moved or freed by
	// Go; the transport reads and places into it directly.
	var buf []byte
	if length > 0 {
		buf = unsafe.Slice((*byte)(addr), int(length))
	}
	return errno(g.do(func(verbs.Time) error {
		p := g.pds[uint32(pd)]
		if p == nil {
			return errInval
		}
		m, err := p.RegisterMRAt(buf, uint64(iova), acc)
		if err != nil {
			return err
		}
		h := g.handle()
		g.mrs[h] = m
		*handle, *lkey, *rkey = C.uint32_t(h), C.uint32_t(m.LKey()), C.uint32_t(m.RKey())
		return nil
	}))
}

//export MetaroceVerbsDeregMR
func MetaroceVerbsDeregMR(mrh C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(verbs.Time) error {
		m := g.mrs[uint32(mrh)]
		if m == nil {
			return errInval
		}
		delete(g.mrs, uint32(mrh))
		return m.Deregister()
	}))
}

//export MetaroceVerbsCreateCQ
func MetaroceVerbsCreateCQ(c *C.struct_mrv_cq, depth C.int, handle *C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(verbs.Time) error {
		n := min(int(depth), 256)
		h := g.handle()
		*handle = C.uint32_t(h)
		q := &cq{core: verbs.NewCompletionQueue(2 * maxQPWR), c: c, buf: make([]verbs.WorkCompletion, 64),
			handle: h, cap: n, scratch: (*C.struct_mrg_wc)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_mrg_wc{}))))}
		q.core.OnReady(func() { g.markCQ(q) })
		g.cqs[h] = q
		return nil
	}))
}

//export MetaroceVerbsDestroyCQ
func MetaroceVerbsDestroyCQ(h C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(verbs.Time) error {
		c := g.cqs[uint32(h)]
		if c == nil {
			return errInval
		}
		if c.users > 0 {
			return errBusy
		}
		delete(g.cqs, uint32(h))
		c.gone = true
		C.free(unsafe.Pointer(c.scratch))
		return nil
	}))
}

//export MetaroceVerbsCreateQP
func MetaroceVerbsCreateQP(pd, scq, rcq C.uint32_t, sqDepth, rqDepth C.int, handle, qpn *C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	_ = rqDepth
	return errno(g.do(func(verbs.Time) error {
		p, s, r := g.pds[uint32(pd)], g.cqs[uint32(scq)], g.cqs[uint32(rcq)]
		if p == nil || s == nil || r == nil {
			return errInval
		}
		idx := -1
		for i, used := range g.qpIdx {
			if !used {
				idx = i
				break
			}
		}
		if idx < 0 {
			return errNoMem
		}
		g.qpIdx[idx] = true
		h := g.handle()
		q := &qp{handle: h, idx: idx, qpn: uint32(g.self.Port())<<8 | uint32(idx+1), pd: p, scq: s, rcq: r,
			sqDepth: int(sqDepth), slots: make([]sendSlot, int(sqDepth)+1)}
		s.users++
		r.users++
		g.qps[h] = q
		*handle, *qpn = C.uint32_t(h), C.uint32_t(q.qpn)
		return nil
	}))
}

//export MetaroceVerbsModifyQP
func MetaroceVerbsModifyQP(h C.uint32_t, a *C.struct_mrg_qp_attr, msg *C.char, msglen C.int) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	state, peer, dest := a.state, uint32(a.peer_ipv4), uint32(a.dest_qpn)
	rqPSN, sqPSN := uint32(a.rq_psn), uint32(a.sq_psn)
	timeout, retry, rnr, minRNR := uint8(a.timeout), uint8(a.retry_cnt), uint8(a.rnr_retry), uint8(a.min_rnr_timer)
	err := g.do(func(now verbs.Time) error {
		q := g.qps[uint32(h)]
		if q == nil {
			return errInval
		}
		switch state {
		case C.IBV_QPS_RTR:
			// The responder's budget now; the requester's come at RTS
			// (a QP in RTR sends nothing: no ACK timeout yet).
			q.timers = verbs.QPTimers{RNRRetry: verbs.RNRForever, MinRNRTimer: minRNR}
			ip := netip.AddrFrom4(*(*[4]byte)(unsafe.Pointer(&peer)))
			return g.connect(now, q, ip, dest, rqPSN)
		case C.IBV_QPS_RTS:
			q.timers.Timeout, q.timers.RetryCnt, q.timers.RNRRetry = timeout, retry, rnr
			if q.setSendPSN != nil && !q.destroyed {
				// The first RTS: sq_psn, before anything is sent.
				err := q.setSendPSN(sqPSN)
				q.setSendPSN = nil
				if err != nil {
					return err
				}
			}
			if ts, ok := q.core.(timerSetter); ok && !q.destroyed {
				ts.SetTimers(now, q.timers)
			}
		case C.IBV_QPS_ERR:
			if q.core != nil && !q.destroyed {
				q.destroyed = true
				return q.core.Destroy(now)
			}
		}
		return nil
	})
	if err != nil && err != errInval {
		setErr(msg, msglen, err.Error())
	}
	return errno(err)
}

//export MetaroceVerbsDestroyQP
func MetaroceVerbsDestroyQP(h C.uint32_t) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	return errno(g.do(func(now verbs.Time) error {
		q := g.qps[uint32(h)]
		if q == nil {
			return errInval
		}
		if q.core != nil && !q.destroyed {
			q.core.Destroy(now)
		}
		// Its completions (flushes) are dropped from now on.
		if q.core != nil {
			delete(g.byCore, q.core.QPN())
		}
		g.dropWaiting(q)
		q.scq.users--
		q.rcq.users--
		g.qpIdx[q.idx] = false
		q.removed = true
		delete(g.qps, uint32(h))
		return nil
	}))
}

// MetaroceVerbsPostSend queues n send work requests (one crossing per
// ibv_post_send call); they go out on this thread if the loop sleeps, at
// the loop's next iteration if it is busy, or at the next empty poll of
// this thread (lazy) or of the one that drives (*deferred 1; kickSend).
//
//export MetaroceVerbsPostSend
func MetaroceVerbsPostSend(h C.uint32_t, wr *C.struct_mrg_send_wr, n, lazy C.int, posted, deferred *C.int) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	ws := unsafe.Slice(wr, int(n))
	g.mu.Lock()
	q := g.qps[uint32(h)]
	if q == nil || q.destroyed {
		g.mu.Unlock()
		*posted = 0
		return C.EINVAL
	}
	k := min(len(ws), q.sqDepth-int(q.outstanding.Load()))
	q.pendSend = append(q.pendSend, ws[:k]...)
	q.outstanding.Add(int64(k))
	g.markPosted(q)
	g.mu.Unlock()
	*deferred = 0
	if k > 0 && g.kickSend(lazy != 0) {
		*deferred = 1
	}
	*posted = C.int(k)
	if k < len(ws) {
		return C.ENOMEM // the send queue is full, as an HCA reports it
	}
	return 0
}

//export MetaroceVerbsPostRecv
func MetaroceVerbsPostRecv(h C.uint32_t, wr *C.struct_mrg_recv_wr, n C.int, posted *C.int) C.int {
	g := getEng()
	if g == nil {
		return C.EOPNOTSUPP
	}
	ws := unsafe.Slice(wr, int(n))
	g.mu.Lock()
	q := g.qps[uint32(h)]
	if q == nil || q.destroyed {
		g.mu.Unlock()
		*posted = 0
		return C.EINVAL
	}
	q.pendRecv = append(q.pendRecv, ws...)
	g.markPosted(q)
	g.mu.Unlock()
	// A receive must reach the core before the SEND it is for: a loop
	// woken by that packet would otherwise answer it with an RNR NAK.
	g.kick()
	*posted = n
	return 0
}
