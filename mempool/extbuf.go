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
};

static void mr_ext_free_cb(void *addr, void *opaque)
{
	(void)addr;
	struct mr_ext_slot *s = opaque;
	__atomic_add_fetch(&s->released, 1, __ATOMIC_RELEASE);
}

// mr_ext_attach_bulk attaches n external buffers to n mbufs in one call:
// mbuf i gets [addrs[i], addrs[i]+lens[i]) through slot slots[i].
static void mr_ext_attach_bulk(uintptr_t mbufs, uintptr_t slotbase, const uint64_t *addrs,
	const uint16_t *lens, const uint32_t *slots, unsigned n)
{
	struct rte_mbuf **ms = (struct rte_mbuf **)mbufs;
	struct mr_ext_slot *base = (struct mr_ext_slot *)slotbase;
	for (unsigned i = 0; i < n; i++) {
		struct mr_ext_slot *s = &base[slots[i]];
		void *addr = (void *)(uintptr_t)addrs[i];
		s->shinfo.free_cb = mr_ext_free_cb;
		s->shinfo.fcb_opaque = s;
		rte_mbuf_ext_refcnt_set(&s->shinfo, 1);
		s->attached++;
		rte_pktmbuf_attach_extbuf(ms[i], addr, rte_mem_virt2iova(addr), lens[i], &s->shinfo);
		ms[i]->data_len = lens[i];
		ms[i]->pkt_len = lens[i];
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
//
// The metaroce core writes each packet into a buffer it is given
// (Transport.NextPacket), so the engine shard does not use ExtTX yet: it
// needs a core that hands out payload references instead of copies.
type ExtTX struct {
	slots *C.struct_mr_ext_slot
	n     int
	free  []uint32
	busy  []bool
	addrs []uint64
	lens  []uint16
	ids   []uint32
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
	x := &ExtTX{slots: (*C.struct_mr_ext_slot)(p), n: n, busy: make([]bool, n)}
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
	for i := 0; i < x.n; i++ {
		if !x.busy[i] {
			continue
		}
		if x.Released(uint32(i)) {
			x.busy[i] = false
			x.free = append(x.free, uint32(i))
		} else {
			inFlight++
		}
	}
	return inFlight
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
