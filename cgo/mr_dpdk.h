/* mr_dpdk.h: static-inline wrappers over DPDK 22.11's inline fast path for
 * metaroce's Go binding (dpdk/). Every function here is one cgo call that
 * handles a whole burst. See doc.go for the rules. */
#ifndef MR_DPDK_H
#define MR_DPDK_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

/* Layout of struct rte_mbuf that dpdk/mbuf.go reads and writes without a
 * cgo call. A DPDK update that moves one of these fails the build here,
 * and dpdk's TestMbufLayout checks the Go side against the same numbers. */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "buf_addr");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "data_off");
_Static_assert(offsetof(struct rte_mbuf, port) == 22, "port");
_Static_assert(offsetof(struct rte_mbuf, ol_flags) == 24, "ol_flags");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "pkt_len");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "data_len");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "buf_len");
_Static_assert(offsetof(struct rte_mbuf, tx_offload) == 72, "tx_offload");
_Static_assert(sizeof(((struct rte_mbuf *)0)->tx_offload) == 8, "tx_offload size");

static inline size_t mr_off_buf_addr(void) { return offsetof(struct rte_mbuf, buf_addr); }
static inline size_t mr_off_data_off(void) { return offsetof(struct rte_mbuf, data_off); }
static inline size_t mr_off_port(void) { return offsetof(struct rte_mbuf, port); }
static inline size_t mr_off_ol_flags(void) { return offsetof(struct rte_mbuf, ol_flags); }
static inline size_t mr_off_pkt_len(void) { return offsetof(struct rte_mbuf, pkt_len); }
static inline size_t mr_off_data_len(void) { return offsetof(struct rte_mbuf, data_len); }
static inline size_t mr_off_buf_len(void) { return offsetof(struct rte_mbuf, buf_len); }
static inline size_t mr_off_tx_offload(void) { return offsetof(struct rte_mbuf, tx_offload); }

/* mr_tx_offload_value is the tx_offload word DPDK builds for the given
 * header lengths (a bitfield: the Go side writes the word directly). */
static inline uint64_t mr_tx_offload_value(uint16_t l2, uint16_t l3, uint16_t l4)
{
	struct rte_mbuf m;
	memset(&m, 0, sizeof(m));
	m.l2_len = l2;
	m.l3_len = l3;
	m.l4_len = l4;
	return m.tx_offload;
}

static inline int mr_errno(void) { return rte_errno; }

/* Burst arrays are passed as uintptr_t: they live in C memory
 * (dpdk.NewMbufArray) and a pointer argument would make cgo check it for
 * Go pointers on every call. */
static inline uint16_t mr_rx_burst(uint16_t port, uint16_t q, uintptr_t pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, q, (struct rte_mbuf **)pkts, n);
}

/* mr_tx_burst sends up to n mbufs; the caller owns (and must free or retry)
 * pkts[ret..n). */
static inline uint16_t mr_tx_burst(uint16_t port, uint16_t q, uintptr_t pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, q, (struct rte_mbuf **)pkts, n);
}

/* mr_tx_burst_free sends up to n mbufs and frees what the queue refused, so
 * a whole burst costs one cgo call. Returns how many were sent. */
static inline uint16_t mr_tx_burst_free(uint16_t port, uint16_t q, uintptr_t p, uint16_t n)
{
	struct rte_mbuf **pkts = (struct rte_mbuf **)p;
	uint16_t sent = rte_eth_tx_burst(port, q, pkts, n);
	if (sent < n)
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	return sent;
}

static inline int mr_alloc_bulk(uintptr_t mp, uintptr_t pkts, unsigned n)
{
	return rte_pktmbuf_alloc_bulk((struct rte_mempool *)mp, (struct rte_mbuf **)pkts, n);
}

static inline void mr_free_bulk(uintptr_t pkts, unsigned n)
{
	rte_pktmbuf_free_bulk((struct rte_mbuf **)pkts, n);
}

static inline unsigned mr_ring_enqueue_burst(uintptr_t r, uintptr_t objs, unsigned n)
{
	return rte_ring_enqueue_burst((struct rte_ring *)r, (void **)objs, n, NULL);
}

static inline unsigned mr_ring_dequeue_burst(uintptr_t r, uintptr_t objs, unsigned n)
{
	return rte_ring_dequeue_burst((struct rte_ring *)r, (void **)objs, n, NULL);
}

static inline unsigned mr_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }

static inline unsigned mr_mempool_avail(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }

#endif
