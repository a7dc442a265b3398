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

// Pool is an mbuf mempool (rte_pktmbuf_pool_create) in DPDK memory:
// hugepages, or anonymous memory under --no-huge.
type Pool struct {
	p *C.struct_rte_mempool
}

// DefaultDataRoom is the mbuf data room of a pool created with dataRoom 0:
// 2 KiB plus headroom, enough for a 1500-byte MTU frame in one segment.
const DefaultDataRoom = C.RTE_MBUF_DEFAULT_BUF_SIZE

// NewPool creates a pool of n mbufs with a per-lcore cache of cache mbufs
// and dataRoom bytes per buffer (0: DefaultDataRoom, which includes the
// 128-byte headroom). The name must be unique in the process.
func NewPool(name string, n, cache, dataRoom int) (*Pool, error) {
	if dataRoom == 0 {
		dataRoom = DefaultDataRoom
	}
	if n <= 0 || cache < 0 || dataRoom <= C.RTE_PKTMBUF_HEADROOM || dataRoom > 65535 {
		return nil, fmt.Errorf("dpdk: pool %q: bad size n=%d cache=%d dataRoom=%d", name, n, cache, dataRoom)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	p := C.rte_pktmbuf_pool_create(cn, C.uint(n), C.uint(cache), 0, C.uint16_t(dataRoom), C.int(SocketID()))
	if p == nil {
		return nil, errno("rte_pktmbuf_pool_create " + name)
	}
	return &Pool{p: p}, nil
}

// AllocBulk fills all of out with fresh mbufs (one cgo call), or none when
// the pool has too few free.
func (p *Pool) AllocBulk(out []*Mbuf) error {
	defer runtime.KeepAlive(out) // passed to C as an integer (see mbufs)
	if len(out) == 0 {
		return nil
	}
	if C.mr_alloc_bulk(C.uintptr_t(uintptr(unsafe.Pointer(p.p))), mbufs(out), C.uint(len(out))) != 0 {
		return &Error{Op: "rte_pktmbuf_alloc_bulk", Errno: int(C.ENOBUFS)}
	}
	return nil
}

// Available is the number of free mbufs in the pool (excluding caches'
// contents that the count cannot see cheaply; see rte_mempool_avail_count).
func (p *Pool) Available() int { return int(C.mr_mempool_avail(p.p)) }

// Free releases the pool; every mbuf must be back in it.
func (p *Pool) Free() {
	if p.p != nil {
		C.rte_mempool_free(p.p)
		p.p = nil
	}
}

// FreeBulk returns mbufs to their pools (one cgo call). The pointers must
// not be used afterwards.
func FreeBulk(s []*Mbuf) {
	defer runtime.KeepAlive(s) // passed to C as an integer (see mbufs)
	if len(s) > 0 {
		C.mr_free_bulk(mbufs(s), C.uint(len(s)))
	}
}

// Malloc returns n zeroed bytes of DPDK memory (rte_zmalloc: hugepages when
// EAL has them), aligned to align (0: cache line), outside the Go heap. It
// stays valid until FreeMem.
func Malloc(name string, n, align int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("dpdk: malloc %q: bad size %d", name, n)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	p := C.rte_zmalloc_socket(cn, C.size_t(n), C.uint(align), C.int(SocketID()))
	if p == nil {
		return nil, &Error{Op: "rte_zmalloc " + name, Errno: int(C.ENOMEM)}
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeMem releases memory from Malloc. After Cleanup all DPDK memory is
// gone already and FreeMem does nothing.
func FreeMem(b []byte) {
	if len(b) > 0 && Initialized() {
		C.rte_free(unsafe.Pointer(unsafe.SliceData(b)))
	}
}
