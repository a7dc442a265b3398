//go:build dpdk

// Package mempool owns the memory of metaroce's DPDK data path: mbuf pools
// (on hugepages, or anonymous memory under --no-huge, with a warning) and
// memory regions for the protocol core's direct placement, allocated
// outside the Go heap so that C (the NIC, external-buffer mbufs) may hold
// their addresses and the Go garbage collector never moves or scans them.
package mempool

import (
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/metaroce/metaroce/dpdk"
)

// Region is a block of registrable memory outside the Go heap: DPDK memory
// (rte_zmalloc, hugepages when the EAL has them) when the EAL runs, else an
// anonymous mmap. Its bytes are stable until Free; after Free they must
// not be touched (the memory is unmapped or returned to DPDK).
type Region struct {
	b    []byte
	dpdk bool
}

var regionSeq atomic.Uint64

// NewRegion allocates n zeroed bytes, page aligned.
func NewRegion(n int) (*Region, error) { return newRegion(n, dpdk.Initialized()) }

func newRegion(n int, inDPDK bool) (*Region, error) {
	if n <= 0 {
		return nil, fmt.Errorf("mempool: region size %d must be positive", n)
	}
	if inDPDK {
		b, err := dpdk.Malloc(fmt.Sprintf("mr_region_%d", regionSeq.Add(1)), n, 4096)
		if err != nil {
			return nil, fmt.Errorf("mempool: region of %d bytes: %w", n, err)
		}
		return &Region{b: b, dpdk: true}, nil
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mempool: mmap %d bytes: %w", n, err)
	}
	return &Region{b: b}, nil
}

// Bytes is the region's memory (pass it to metaroce's RegisterMR).
func (r *Region) Bytes() []byte { return r.b }

// InDPDKMemory reports whether the region came from DPDK's allocator.
func (r *Region) InDPDKMemory() bool { return r.dpdk }

// Free releases the region. The caller must have deregistered it first.
func (r *Region) Free() error {
	if r.b == nil {
		return nil
	}
	b := r.b
	r.b = nil
	if r.dpdk {
		dpdk.FreeMem(b)
		return nil
	}
	return syscall.Munmap(b)
}
