//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// IOResult is what one IO call did.
type IOResult struct {
	Sent  int    // frames the transmit queue took (the caller keeps tx[Sent:])
	Got   int    // frames received into rx[:Got]
	Polls int    // receive polls made (more than one when it waited)
	TxTSC uint64 // TSC cycles the transmit burst took
	Spin  uint64 // TSC cycles spent waiting for a frame (or a wake)
}

// IO is a shard iteration's driver work on one port in one cgo call:
// transmit tx on queue txq, free frees, then receive up to len(rx) frames
// from queues 0..rxQueues-1. With spin > 0 (TSC cycles) and nothing
// received, it keeps polling (and retrying the transmit of what the queue
// refused), a pause instruction between polls, until a frame comes, the
// queue takes a refused frame, the word wake (a Word; nil: none) is
// non-zero, or spin cycles have passed. Every array must be C memory
// (NewMbufArray).
func (p PortID) IO(txq uint16, tx, frees []*Mbuf, rxQueues uint16, rx []*Mbuf, spin uint64, wake *Word) IOResult {
	defer runtime.KeepAlive(tx)
	defer runtime.KeepAlive(frees)
	defer runtime.KeepAlive(rx)
	var w C.uintptr_t
	if wake != nil {
		w = C.uintptr_t(uintptr(unsafe.Pointer(wake.p)))
	}
	r := C.mr_io(C.uint16_t(p), C.uint16_t(txq), mbufs(tx), C.uint16_t(len(tx)),
		mbufs(frees), C.uint16_t(len(frees)), C.uint16_t(rxQueues), mbufs(rx), C.uint16_t(len(rx)),
		C.uint64_t(spin), w)
	return IOResult{Sent: int(r.sent), Got: int(r.got), Polls: int(r.polls),
		TxTSC: uint64(r.tx_cycles), Spin: uint64(r.spin_cycles)}
}

// TSCHz is the frequency of the TSC that IO's cycle counts use
// (rte_get_tsc_hz; EAL must be initialized).
func TSCHz() uint64 { return uint64(C.mr_tsc_hz()) }

// Word is a 32-bit flag in C memory that Go sets and C code reads while it
// waits (IO's wake): a Go-memory address must not be handed to C to keep.
type Word struct{ p *uint32 }

// NewWord returns a zero Word; Free releases it.
func NewWord() *Word {
	p := C.calloc(1, 8)
	if p == nil {
		panic("dpdk: out of C memory for a word")
	}
	return &Word{p: (*uint32)(p)}
}

// Set makes the word non-zero (from any goroutine).
func (w *Word) Set() { atomic.StoreUint32(w.p, 1) }

// Clear makes it zero.
func (w *Word) Clear() { atomic.StoreUint32(w.p, 0) }

// IsSet reports whether it is non-zero.
func (w *Word) IsSet() bool { return atomic.LoadUint32(w.p) != 0 }

// Free releases the word's memory; it must not be used after.
func (w *Word) Free() {
	if w.p != nil {
		C.free(unsafe.Pointer(w.p))
		w.p = nil
	}
}
