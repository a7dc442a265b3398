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
#include <rte_pause.h>
#include <rte_cycles.h>
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

/* mr_io is one iteration's driver work for a shard on one port, in one cgo
 * call (dpdk.PortID.IO): send the frames left from the previous iteration
 * (ntx of them at tx, on queue txq; the caller keeps tx[sent..ntx)), free
 * the frames the previous iteration received and consumed (nfree at
 * frees), then receive up to nrx frames from queues 0..nrxq-1 into rx.
 *
 * With spin > 0, an empty receive is retried (and so is the transmit of
 * what the queue refused), with a pause instruction between polls, until a
 * frame comes, the queue takes a refused frame, *wake becomes non-zero
 * (another thread has work for the shard: Shard.Do, Shard.Kick) or spin
 * TSC cycles have passed: an idle
 * shard waits here, polling, at the cost of one cgo call per wait instead
 * of one per poll, and a frame that arrives is taken at once. Clocks:
 * tx_cycles is the TSC time of the first transmit, spin_cycles the time
 * spent waiting after the first poll (both by rte_rdtsc, read only around
 * those parts). */
struct mr_io_res {
	uint16_t sent, got;
	uint32_t polls;
	uint64_t tx_cycles, spin_cycles;
};

static inline struct mr_io_res mr_io(uint16_t port, uint16_t txq, uintptr_t tx, uint16_t ntx,
				     uintptr_t frees, uint16_t nfree,
				     uint16_t nrxq, uintptr_t rx, uint16_t nrx,
				     uint64_t spin, uintptr_t wake)
{
	struct mr_io_res r = {0, 0, 0, 0, 0};
	struct rte_mbuf **txp = (struct rte_mbuf **)tx, **rxp = (struct rte_mbuf **)rx;
	if (ntx > 0) {
		uint64_t t0 = rte_rdtsc();
		r.sent = rte_eth_tx_burst(port, txq, txp, ntx);
		r.tx_cycles = rte_rdtsc() - t0;
	}
	if (nfree > 0)
		rte_pktmbuf_free_bulk((struct rte_mbuf **)frees, nfree);
	uint64_t start = 0;
	for (;;) {
		uint16_t got = 0;
		for (uint16_t q = 0; q < nrxq && got < nrx; q++)
			got += rte_eth_rx_burst(port, q, rxp + got, nrx - got);
		r.polls++;
		if (got > 0 || spin == 0) {
			r.got = got;
			break;
		}
		if (wake != 0 && __atomic_load_n((const uint32_t *)wake, __ATOMIC_ACQUIRE) != 0)
			break;
		uint64_t now = rte_rdtsc();
		if (start == 0)
			start = now;
		else if (now - start >= spin)
			break;
		rte_pause();
		if (r.sent < ntx) {
			uint16_t n = rte_eth_tx_burst(port, txq, txp + r.sent, ntx - r.sent);
			r.sent += n;
			if (n > 0)
				break; /* the queue has room again: back to producing */
		}
	}
	if (start != 0)
		r.spin_cycles = rte_rdtsc() - start;
	return r;
}

static inline uint64_t mr_tsc_hz(void) { return rte_get_tsc_hz(); }

#endif
