//go:build dpdk

package mempool

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../cgo -O2 -Wno-deprecated-declarations
#include "mr_dpdk.h"

// One shared-info record per external buffer in flight. The free
// callback runs wherever the last reference drops (the driver's tx
// completion, or rte_pktmbuf_free); it only bumps a counter that Go reads,
// so C never calls Go.
struct mr_ext_slot {
	struct rte_mbuf_ext_shared_info shinfo;
	volatile uint32_t attached, released;
	uint32_t *region; // the region's in-flight count (C memory), or NULL
};

// mr_iova is addr's IO address. rte_mem_virt2iova would read
// /proc/self/pagemap (a system call per packet) when the EAL runs with
// physical addresses (hugepages without an IOMMU); DPDK's own memory
// knows its IO addresses (the memseg, found without a system call), so
// ask it, the VA case aside. (rte_malloc_virt2iova takes only the start
// of an allocation, not an address inside one.)
static inline rte_iova_t mr_iova(void *addr)
{
	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)(uintptr_t)addr;
	const struct rte_memseg *ms = rte_mem_virt2memseg(addr, NULL);
	if (ms == NULL || ms->iova == RTE_BAD_IOVA)
		return RTE_BAD_IOVA;
	return ms->iova + RTE_PTR_DIFF(addr, ms->addr);
}

static void mr_ext_free_cb(void *addr, void *opaque)
{
	(void)addr;
	struct mr_ext_slot *s = opaque;
	uint32_t *r = s->region;
	__atomic_add_fetch(&s->released, 1, __ATOMIC_RELEASE);
	if (r != NULL)
		__atomic_sub_fetch(r, 1, __ATOMIC_SEQ_CST);
}

// mr_ext_attach_one makes m's data the external buffer [addr, addr+len)
// through slot s, whose free callback will also lower *region (when not
// NULL). The slot's attached count is the caller's.
static inline void mr_ext_attach_one(struct rte_mbuf *m, struct mr_ext_slot *s, uint64_t addr, uint16_t len,
	uint32_t *region)
{
	void *a = (void *)(uintptr_t)addr;
	s->shinfo.free_cb = mr_ext_free_cb;
	s->shinfo.fcb_opaque = s;
	s->region = region;
	rte_mbuf_ext_refcnt_set(&s->shinfo, 1);
	rte_pktmbuf_attach_extbuf(m, a, mr_iova(a), len, &s->shinfo);
	m->data_len = len;
	m->pkt_len = len;
}

// mr_ext_chain_bulk builds n three-segment packets in one call: packet i
// is heads[i] (its headers, data_len set), then pays[i] attached to the
// external buffer [addrs[i], addrs[i]+lens[i]) through slot slots[i], then
// trails[i] (its bytes, data_len set). The caller raised the slot's
// attached count (so that the slot reads as held from the moment Chain
// takes it, before this call) and the region's counter; the free callback
// raises released and lowers the region's counter.
static void mr_ext_chain_bulk(uintptr_t heads, uintptr_t pays, uintptr_t trails, uintptr_t slotbase,
	const uint64_t *addrs, const uint16_t *lens, const uint32_t *slots, const uintptr_t *regions, unsigned n)
{
	struct rte_mbuf **hs = (struct rte_mbuf **)heads, **ps = (struct rte_mbuf **)pays, **ts = (struct rte_mbuf **)trails;
	struct mr_ext_slot *base = (struct mr_ext_slot *)slotbase;
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *h = hs[i], *p = ps[i], *t = ts[i];
		mr_ext_attach_one(p, &base[slots[i]], addrs[i], lens[i], (uint32_t *)regions[i]);
		h->next = p;
		p->next = t;
		t->next = NULL;
		h->nb_segs = 3;
		h->pkt_len = (uint32_t)h->data_len + lens[i] + t->data_len;
	}
}

static uint32_t *mr_ext_counter(void) { return calloc(1, sizeof(uint32_t)); }

// mr_ext_attach_bulk attaches n external buffers to n mbufs in one call:
// mbuf i gets [addrs[i], addrs[i]+lens[i]) through slot slots[i].
static void mr_ext_attach_bulk(uintptr_t mbufs, uintptr_t slotbase, const uint64_t *addrs,
	const uint16_t *lens, const uint32_t *slots, unsigned n)
{
	struct rte_mbuf **ms = (struct rte_mbuf **)mbufs;
	struct mr_ext_slot *base = (struct mr_ext_slot *)slotbase;
	for (unsigned i = 0; i < n; i++) {
		base[slots[i]].attached++;
		mr_ext_attach_one(ms[i], &base[slots[i]], addrs[i], lens[i], NULL);
	}
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	_ "github.com/metaroce/metaroce/cgo" // the headers: a change rebuilds this package
	"github.com/metaroce/metaroce/dpdk"
)

// ExtTX attaches registered memory to mbufs as external buffers, so a
// payload goes to the NIC without being copied into the mbuf: zero-copy
// TX. Each attach uses a slot (a shared-info record in C memory) until the
// driver is done with the buffer; Released says when, so the memory may
// be reused or deregistered. One goroutine owns an ExtTX.
// The DPDK engine's shard uses it for zero-copy TX (Chain, Flush,
// ReclaimOrdered; docs/dpdk.md).
type ExtTX struct {
	slots *C.struct_mr_ext_slot
	n     int
	free  []uint32
	busy  []bool
	addrs []uint64
	lens  []uint16
	ids   []uint32
	// The batch Chain builds and Flush hands to C (capacity fixed at
	// NewExtTX), and the slots in attach order (a ring of n) that
	// ReclaimOrdered walks from its head.
	heads, pays, trails []*dpdk.Mbuf
	regs                []uintptr
	order               []uint32
	oHead, oLen         int
}

// NewExtTX returns n slots.
func NewExtTX(n int) (*ExtTX, error) {
	if n <= 0 || n > 1<<20 {
		return nil, fmt.Errorf("mempool: %d extbuf slots outside 1..%d", n, 1<<20)
	}
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_mr_ext_slot{})))
	if p == nil {
		return nil, errors.New("mempool: out of C memory for extbuf slots")
	}
	x := &ExtTX{slots: (*C.struct_mr_ext_slot)(p), n: n, busy: make([]bool, n), order: make([]uint32, n),
		free: make([]uint32, 0, n), addrs: make([]uint64, 0, n), lens: make([]uint16, 0, n), ids: make([]uint32, 0, n),
		heads: make([]*dpdk.Mbuf, 0, n), pays: make([]*dpdk.Mbuf, 0, n), trails: make([]*dpdk.Mbuf, 0, n), regs: make([]uintptr, 0, n)}
	for i := n - 1; i >= 0; i-- {
		x.free = append(x.free, uint32(i))
	}
	return x, nil
}

func (x *ExtTX) slot(i uint32) *C.struct_mr_ext_slot {
	return (*C.struct_mr_ext_slot)(unsafe.Add(unsafe.Pointer(x.slots), uintptr(i)*unsafe.Sizeof(C.struct_mr_ext_slot{})))
}

// Attach makes ms[i]'s data the bytes bufs[i], without copying, in one cgo
// call, and returns the slot of each in slots (len(ms) entries). Every
// bufs[i] must lie in DPDK memory (a Region made while the EAL runs) and
// be at most 65535 bytes; the mbufs must be fresh from a pool. The memory
// must stay untouched until Released reports the slot done.
func (x *ExtTX) Attach(ms []*dpdk.Mbuf, bufs [][]byte, slots []uint32) error {
	if len(bufs) != len(ms) || len(slots) < len(ms) {
		return errors.New("mempool: Attach needs one buffer and one slot entry per mbuf")
	}
	if len(x.free) < len(ms) {
		return fmt.Errorf("mempool: %d extbuf slots free, %d needed", len(x.free), len(ms))
	}
	x.addrs, x.lens, x.ids = x.addrs[:0], x.lens[:0], x.ids[:0]
	for i, b := range bufs {
		if len(b) == 0 || len(b) > 65535 {
			return fmt.Errorf("mempool: extbuf %d has %d bytes (1..65535)", i, len(b))
		}
		x.addrs = append(x.addrs, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))))
		x.lens = append(x.lens, uint16(len(b)))
	}
	for i := range ms {
		id := x.free[len(x.free)-1]
		x.free = x.free[:len(x.free)-1]
		x.busy[id] = true
		x.ids = append(x.ids, id)
		slots[i] = id
	}
	C.mr_ext_attach_bulk(C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(ms)))), C.uintptr_t(uintptr(unsafe.Pointer(x.slots))),
		(*C.uint64_t)(unsafe.Pointer(&x.addrs[0])), (*C.uint16_t)(unsafe.Pointer(&x.lens[0])), (*C.uint32_t)(unsafe.Pointer(&x.ids[0])), C.uint(len(ms)))
	runtime.KeepAlive(ms)
	return nil
}

// Released reports whether the driver has let go of the buffer attached
// through slot (its last mbuf reference was freed).
func (x *ExtTX) Released(slot uint32) bool {
	s := x.slot(slot)
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&s.released))) == uint32(s.attached)
}

// Reclaim returns every released slot to the free list and reports how
// many slots are still in flight.
func (x *ExtTX) Reclaim() (inFlight int) {
	x.oHead, x.oLen = 0, 0
	for i := 0; i < x.n; i++ {
		if !x.busy[i] {
			continue
		}
		if x.Released(uint32(i)) {
			x.busy[i] = false
			x.free = append(x.free, uint32(i))
		} else {
			x.order[x.oLen] = uint32(i)
			x.oLen++
			inFlight++
		}
	}
	return inFlight
}

// FreeSlots is the number of slots free now (without reclaiming).
func (x *ExtTX) FreeSlots() int { return len(x.free) }

// InFlight is the number of slots attached and not yet reclaimed.
func (x *ExtTX) InFlight() int { return x.n - len(x.free) }

// ReclaimOrdered returns to the free list the slots released in attach
// order, from the oldest, and stops at the first one still held: constant
// work per slot (a driver releases its buffers in about the order it took
// them; one held longer only delays the ones behind it). Only for slots
// attached with Chain.
func (x *ExtTX) ReclaimOrdered() {
	for x.oLen > 0 {
		id := x.order[x.oHead]
		if !x.Released(id) {
			return
		}
		x.busy[id] = false
		x.free = append(x.free, id)
		x.oHead = (x.oHead + 1) % x.n
		x.oLen--
	}
}

// Chain adds to the batch one packet of three segments: head (its
// headers, length set), pay attached to b without copying, trail (its
// bytes, length set); Flush builds the batch. b must lie in r, a live
// region in DPDK memory (RegionOf), and be 1..65535 bytes; the mbufs must
// be fresh from a pool. It returns false, with nothing added, when no slot
// is free or r is being freed: the caller copies instead. r's in-flight
// count holds until the driver frees pay, so r.Free waits for it.
func (x *ExtTX) Chain(head, pay, trail *dpdk.Mbuf, b []byte, r *Region) bool {
	if len(x.free) == 0 || len(b) == 0 || len(b) > 65535 || !r.hold() {
		return false
	}
	id := x.free[len(x.free)-1]
	x.free = x.free[:len(x.free)-1]
	x.busy[id] = true
	x.slot(id).attached++ // held from now: ReclaimOrdered must not take it back before Flush
	x.order[(x.oHead+x.oLen)%x.n] = id
	x.oLen++
	x.heads, x.pays, x.trails = append(x.heads, head), append(x.pays, pay), append(x.trails, trail)
	x.addrs = append(x.addrs, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))))
	x.lens = append(x.lens, uint16(len(b)))
	x.ids = append(x.ids, id)
	x.regs = append(x.regs, uintptr(unsafe.Pointer(r.inflight)))
	return true
}

// Flush attaches and chains the batch Chain built, in one cgo call, and
// reports whether there was one (the caller counts the call).
func (x *ExtTX) Flush() bool {
	n := len(x.heads)
	if n == 0 {
		return false
	}
	C.mr_ext_chain_bulk(C.uintptr_t(uintptr(unsafe.Pointer(&x.heads[0]))), C.uintptr_t(uintptr(unsafe.Pointer(&x.pays[0]))),
		C.uintptr_t(uintptr(unsafe.Pointer(&x.trails[0]))), C.uintptr_t(uintptr(unsafe.Pointer(x.slots))),
		(*C.uint64_t)(unsafe.Pointer(&x.addrs[0])), (*C.uint16_t)(unsafe.Pointer(&x.lens[0])),
		(*C.uint32_t)(unsafe.Pointer(&x.ids[0])), (*C.uintptr_t)(unsafe.Pointer(&x.regs[0])), C.uint(n))
	x.heads, x.pays, x.trails, x.regs = x.heads[:0], x.pays[:0], x.trails[:0], x.regs[:0]
	x.addrs, x.lens, x.ids = x.addrs[:0], x.lens[:0], x.ids[:0]
	return true
}

// Free releases the slots; none may be in flight.
func (x *ExtTX) Free() error {
	if n := x.Reclaim(); n > 0 {
		return fmt.Errorf("mempool: %d extbuf slots still in flight", n)
	}
	C.free(unsafe.Pointer(x.slots))
	x.slots = nil
	return nil
}

// newCounter is a region's in-flight count, in C memory: the free callback
// lowers it from whatever thread frees the last reference.
func newCounter() *uint32 { return (*uint32)(unsafe.Pointer(C.mr_ext_counter())) }

func freeCounter(c *uint32) { C.free(unsafe.Pointer(c)) }
