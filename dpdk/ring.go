//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Ring is an rte_ring of mbuf pointers between two threads (an lcore loop
// and an engine shard). Created single-producer/single-consumer: exactly
// one thread enqueues and one dequeues.
type Ring struct {
	r *C.struct_rte_ring
}

// NewRing creates a ring with room for size-1 entries; size must be a power
// of two. The name must be unique in the process.
func NewRing(name string, size int) (*Ring, error) {
	if size < 2 || size&(size-1) != 0 {
		return nil, fmt.Errorf("dpdk: ring %q: size %d is not a power of two >= 2", name, size)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	r := C.rte_ring_create(cn, C.uint(size), C.int(SocketID()), C.RING_F_SP_ENQ|C.RING_F_SC_DEQ)
	if r == nil {
		return nil, errno("rte_ring_create " + name)
	}
	return &Ring{r: r}, nil
}

// Ptr is the ring for C code (the lcore loops).
func (r *Ring) Ptr() unsafe.Pointer { return unsafe.Pointer(r.r) }

// Enqueue adds as many of s as fit (one cgo call) and returns how many;
// the caller still owns s[n:].
func (r *Ring) Enqueue(s []*Mbuf) int {
	defer runtime.KeepAlive(s) // passed to C as an integer (see mbufs)
	if len(s) == 0 {
		return 0
	}
	return int(C.mr_ring_enqueue_burst(C.uintptr_t(uintptr(unsafe.Pointer(r.r))), mbufs(s), C.uint(len(s))))
}

// Dequeue moves up to len(out) mbufs into out (one cgo call).
func (r *Ring) Dequeue(out []*Mbuf) int {
	defer runtime.KeepAlive(out) // passed to C as an integer (see mbufs)
	if len(out) == 0 {
		return 0
	}
	return int(C.mr_ring_dequeue_burst(C.uintptr_t(uintptr(unsafe.Pointer(r.r))), mbufs(out), C.uint(len(out))))
}

// Count is the number of entries in the ring.
func (r *Ring) Count() int { return int(C.mr_ring_count(r.r)) }

// Free releases the ring (it should be empty; entries left are not freed).
func (r *Ring) Free() {
	if r.r != nil {
		C.rte_ring_free(r.r)
		r.r = nil
	}
}
