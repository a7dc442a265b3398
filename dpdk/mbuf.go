//go:build dpdk

package dpdk

/*
#include "mr_dpdk.h"
*/
import "C"

import "unsafe"

// Mbuf is a DPDK packet buffer (struct rte_mbuf) living in a mempool in
// DPDK memory. Go code holds *Mbuf only between receiving it (RxBurst,
// AllocBulk, ring dequeue) and handing it on (TxBurst, FreeBulk, ring
// enqueue); after that the pointer must not be used.
//
// The accessors read and write the struct directly at offsets locked by
// _Static_assert in cgo/mr_dpdk.h and checked by TestMbufLayout, so
// touching a packet costs no cgo call.
type Mbuf C.struct_rte_mbuf

// Offsets in struct rte_mbuf (DPDK 22.11, x86_64).
const (
	offBufAddr   = 0
	offDataOff   = 16
	offPort      = 22
	offOLFlags   = 24
	offPktLen    = 36
	offDataLen   = 40
	offBufLen    = 54
	offTxOffload = 72
)

// Offload flags (rte_mbuf_core.h) the data path uses.
const (
	RxIPCksumMask = uint64(1<<4 | 1<<7)
	RxIPCksumBad  = uint64(1 << 4)
	RxIPCksumGood = uint64(1 << 7)
	RxL4CksumMask = uint64(1<<3 | 1<<8)
	RxL4CksumBad  = uint64(1 << 3)
	RxL4CksumGood = uint64(1 << 8)

	TxIPv4      = uint64(1) << 55
	TxIPCksum   = uint64(1) << 54
	TxUDPCksum  = uint64(3) << 52
	TxL4NoCksum = uint64(0)
)

func (m *Mbuf) field(off uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(m), off) }

// Data returns the packet bytes of this (single) segment, in DPDK memory.
func (m *Mbuf) Data() []byte {
	base := *(*unsafe.Pointer)(m.field(offBufAddr))
	off := *(*uint16)(m.field(offDataOff))
	n := *(*uint16)(m.field(offDataLen))
	return unsafe.Slice((*byte)(unsafe.Add(base, off)), n)
}

// Room returns the whole writable area from the data offset to the end of
// the buffer, for building a packet in place; SetLen then fixes its length.
func (m *Mbuf) Room() []byte {
	base := *(*unsafe.Pointer)(m.field(offBufAddr))
	off := *(*uint16)(m.field(offDataOff))
	n := *(*uint16)(m.field(offBufLen))
	return unsafe.Slice((*byte)(unsafe.Add(base, off)), int(n)-int(off))
}

// Len is the packet length (pkt_len).
func (m *Mbuf) Len() int { return int(*(*uint32)(m.field(offPktLen))) }

// SetLen makes the mbuf a single segment of n bytes.
func (m *Mbuf) SetLen(n int) {
	*(*uint32)(m.field(offPktLen)) = uint32(n)
	*(*uint16)(m.field(offDataLen)) = uint16(n)
}

// Port is the port the mbuf arrived on.
func (m *Mbuf) Port() PortID { return PortID(*(*uint16)(m.field(offPort))) }

// OLFlags are the offload flags (ol_flags).
func (m *Mbuf) OLFlags() uint64 { return *(*uint64)(m.field(offOLFlags)) }

// SetTxOffload sets ol_flags and the l2/l3/l4 header lengths DPDK's
// checksum offload needs.
func (m *Mbuf) SetTxOffload(flags uint64, l2, l3, l4 int) {
	*(*uint64)(m.field(offOLFlags)) = flags
	*(*uint64)(m.field(offTxOffload)) = uint64(l2) | uint64(l3)<<7 | uint64(l4)<<16
}

// cLayout returns the offsets and the tx_offload encoding as C computes
// them, for TestMbufLayout.
func cLayout() (offs [8]uintptr, txoff uint64) {
	offs = [8]uintptr{
		uintptr(C.mr_off_buf_addr()), uintptr(C.mr_off_data_off()), uintptr(C.mr_off_port()),
		uintptr(C.mr_off_ol_flags()), uintptr(C.mr_off_pkt_len()), uintptr(C.mr_off_data_len()),
		uintptr(C.mr_off_buf_len()), uintptr(C.mr_off_tx_offload()),
	}
	return offs, uint64(C.mr_tx_offload_value(14, 20, 8))
}

// cFlags returns the C values of the offload flags above, for the layout test.
func cFlags() []uint64 {
	return []uint64{
		C.RTE_MBUF_F_RX_IP_CKSUM_MASK, C.RTE_MBUF_F_RX_IP_CKSUM_BAD, C.RTE_MBUF_F_RX_IP_CKSUM_GOOD,
		C.RTE_MBUF_F_RX_L4_CKSUM_MASK, C.RTE_MBUF_F_RX_L4_CKSUM_BAD, C.RTE_MBUF_F_RX_L4_CKSUM_GOOD,
		C.RTE_MBUF_F_TX_IPV4, C.RTE_MBUF_F_TX_IP_CKSUM, C.RTE_MBUF_F_TX_UDP_CKSUM,
	}
}

// mbufs passes a burst array to C as an integer, so cgo does not check
// it for Go pointers on every call. The array must be C memory
// (NewMbufArray) or Go memory that stays live and unmoved during the call
// (the Go heap does not move objects; the caller keeps s alive).
func mbufs(s []*Mbuf) C.uintptr_t {
	return C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(s))))
}

// NewMbufArray returns an array of n mbuf pointers in C memory, as a Go
// slice. Burst arrays passed to DPDK on every call should live there: cgo
// checks a Go-memory argument element by element for Go pointers on every
// call (it showed as a third of a shard's CPU time), C memory it does not.
// Appending beyond cap(s) would move it to the Go heap; callers must not.
// Free it with FreeMbufArray.
func NewMbufArray(n int) []*Mbuf {
	if n <= 0 {
		return nil
	}
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*Mbuf)(nil))))
	if p == nil {
		panic("dpdk: out of C memory for an mbuf array")
	}
	return unsafe.Slice((**Mbuf)(p), n)
}

// FreeMbufArray releases an array from NewMbufArray (not the mbufs in it).
func FreeMbufArray(s []*Mbuf) {
	if cap(s) > 0 {
		C.free(unsafe.Pointer(unsafe.SliceData(s[:1])))
	}
}
