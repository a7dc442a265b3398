//go:build dpdk

// Package mempool owns the memory of metaroce's DPDK data path: mbuf pools
// (on hugepages, or anonymous memory under --no-huge, with a warning) and
// memory regions for the protocol core's direct placement, allocated
// outside the Go heap so that C (the NIC, external-buffer mbufs) may hold
// their addresses and the Go garbage collector never moves or scans them.
package mempool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/metaroce/metaroce/dpdk"
)

// Region is a block of registrable memory outside the Go heap: DPDK memory
// (rte_zmalloc, hugepages when the EAL has them) when the EAL runs, else an
// anonymous mmap. Its bytes are stable until Free; after Free they must
// not be touched (the memory is unmapped or returned to DPDK).
//
// A region in DPDK memory may lend its bytes to the driver as external
// buffers (zero-copy TX, ExtTX.Chain): inflight counts those the driver
// has not freed yet, and Free waits for them.
type Region struct {
	b    []byte
	dpdk bool
	// inflight (C memory, atomic) and dead (set by Free before it waits)
	// follow the pattern hold and Free share: hold raises inflight, then
	// checks dead; Free sets dead, then waits for inflight to reach 0. No
	// hold succeeds after Free has seen 0.
	inflight *uint32
	dead     atomic.Bool
	lo, hi   uintptr // b's address range, fixed at creation (RegionOf reads it unlocked)
}

// The live DPDK-memory regions, for RegionOf: a copy-on-write list, so
// the data path reads it without a lock or an allocation.
var (
	liveMu sync.Mutex
	live   atomic.Pointer[[]*Region]
)

func setLive(add, del *Region) {
	liveMu.Lock()
	defer liveMu.Unlock()
	var next []*Region
	if cur := live.Load(); cur != nil {
		for _, r := range *cur {
			if r != del {
				next = append(next, r)
			}
		}
	}
	if add != nil {
		next = append(next, add)
	}
	live.Store(&next)
}

// RegionOf returns the live region in DPDK memory that holds all of b, or
// nil (b is elsewhere: Go heap, an mmap, a region being freed). Only such
// memory may go to the driver as an external buffer: rte_mem_virt2iova of
// anything else is wrong. Constant work for a handful of regions; no
// allocation.
func RegionOf(b []byte) *Region {
	cur := live.Load()
	if cur == nil || len(b) == 0 {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for _, r := range *cur {
		if p >= r.lo && p+uintptr(len(b)) <= r.hi && !r.dead.Load() {
			return r
		}
	}
	return nil
}

// hold counts one more external buffer lent from r, unless r is being
// freed.
func (r *Region) hold() bool {
	if r == nil || r.inflight == nil {
		return false
	}
	atomic.AddUint32(r.inflight, 1)
	if r.dead.Load() {
		atomic.AddUint32(r.inflight, ^uint32(0))
		return false
	}
	return true
}

// InFlight is the number of r's external buffers the driver still holds.
func (r *Region) InFlight() int {
	if r.inflight == nil {
		return 0
	}
	return int(atomic.LoadUint32(r.inflight))
}

// freeWait bounds Free's wait for a region's external buffers.
var freeWait = 2 * time.Second

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
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		r := &Region{b: b, dpdk: true, inflight: newCounter(), lo: lo, hi: lo + uintptr(len(b))}
		setLive(r, nil)
		return r, nil
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
// A DPDK-memory region first stops lending its bytes (RegionOf no longer
// finds it) and waits, up to freeWait, for the driver to free the external
// buffers it still holds; if they are not all freed by then it fails and
// keeps the memory (leaked rather than freed under the driver).
func (r *Region) Free() error {
	if r.b == nil {
		return nil
	}
	if r.dpdk {
		r.dead.Store(true)
		setLive(nil, r)
		for t0 := time.Now(); r.InFlight() > 0; time.Sleep(time.Millisecond) {
			if time.Since(t0) > freeWait {
				return fmt.Errorf("mempool: region of %d bytes: %d external buffers still held by the driver", len(r.b), r.InFlight())
			}
		}
		b := r.b
		r.b = nil
		freeCounter(r.inflight)
		r.inflight = nil
		dpdk.FreeMem(b)
		return nil
	}
	b := r.b
	r.b = nil
	return syscall.Munmap(b)
}
