/* mr_lcore.h: the C lcore loop of metaroce's DPDK data path (lcore/).
 *
 * One loop runs on one EAL worker lcore and owns one rx and one tx queue of
 * one port. It receives bursts, steers each frame to an engine shard's rx
 * ring and moves the shards' tx rings to the port. It never calls Go.
 *
 * Steering: spraying changes a connection's UDP source port with every
 * path, so hashing the 5-tuple (RSS) would scatter one connection over
 * shards. The destination port never changes: shard i listens on UDP port
 * base_port + i, so all of a connection's packets reach the same shard.
 * Everything else (ARP, other traffic) goes to shard 0, which counts and
 * drops what is not for it.
 *
 * Idle back-off: after idle_spins empty iterations the loop sleeps, from
 * 1 µs doubling up to max_sleep_us, so an idle process does not burn a
 * core; any packet resets it. */
#ifndef MR_LCORE_H
#define MR_LCORE_H

#include "mr_dpdk.h"
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_udp.h>
#include <rte_ether.h>

#define MR_MAX_SHARDS 16
#define MR_LCORE_BURST 64

struct mr_lcore_conf {
	volatile uint32_t stop;      /* set by Go to end the loop */
	uint16_t port, rxq, txq;
	uint16_t nshards;
	uint16_t base_port;          /* UDP destination port of shard 0 */
	uint32_t burst;
	uint32_t idle_spins;
	uint32_t max_sleep_us;
	struct rte_ring *rx[MR_MAX_SHARDS]; /* lcore -> shard */
	struct rte_ring *tx[MR_MAX_SHARDS]; /* shard -> lcore */
	/* Counters, written by the loop only; Go reads them after a stop or
	 * as approximate live values. */
	volatile uint64_t loops, rx_pkts, tx_pkts, tx_dropped;
	volatile uint64_t rx_ring_full, to_default, idle_sleeps;
	volatile uint64_t per_shard[MR_MAX_SHARDS];
};

/* mr_steer returns the shard of a frame: base_port+i -> i; anything else
 * returns MR_NOT_STEERED (the caller sends it to shard 0). */
#define MR_NOT_STEERED 0xffffu
static inline unsigned mr_steer(const struct mr_lcore_conf *c, struct rte_mbuf *m)
{
	if (rte_pktmbuf_data_len(m) < sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
		return MR_NOT_STEERED;
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return MR_NOT_STEERED;
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
	unsigned ihl = (ip->version_ihl & 0x0f) * 4;
	if (ip->next_proto_id != IPPROTO_UDP || ihl < 20 ||
	    rte_pktmbuf_data_len(m) < sizeof(*eth) + ihl + sizeof(struct rte_udp_hdr))
		return MR_NOT_STEERED;
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)((const uint8_t *)ip + ihl);
	unsigned d = (unsigned)rte_be_to_cpu_16(udp->dst_port) - c->base_port;
	return d < c->nshards ? d : MR_NOT_STEERED;
}

static int mr_lcore_loop(void *arg)
{
	struct mr_lcore_conf *c = arg;
	struct rte_mbuf *pkts[MR_LCORE_BURST];
	struct rte_mbuf *steered[MR_MAX_SHARDS][MR_LCORE_BURST];
	unsigned counts[MR_MAX_SHARDS];
	unsigned burst = c->burst > MR_LCORE_BURST ? MR_LCORE_BURST : c->burst;
	uint32_t idle = 0, sleep_us = 1;
	struct rte_mbuf *pend[MR_LCORE_BURST];
	unsigned npend = 0, pstart = 0, rr = 0;

	while (!c->stop) {
		unsigned work = 0;
		c->loops++;
		uint16_t n = rte_eth_rx_burst(c->port, c->rxq, pkts, burst);
		if (n) {
			work += n;
			c->rx_pkts += n;
			memset(counts, 0, sizeof(counts[0]) * c->nshards);
			for (uint16_t i = 0; i < n; i++) {
				unsigned s = mr_steer(c, pkts[i]);
				if (s == MR_NOT_STEERED) {
					c->to_default++;
					s = 0;
				}
				steered[s][counts[s]++] = pkts[i];
			}
			for (unsigned s = 0; s < c->nshards; s++) {
				if (!counts[s])
					continue;
				c->per_shard[s] += counts[s];
				unsigned k = rte_ring_enqueue_burst(c->rx[s], (void **)steered[s], counts[s], NULL);
				if (k < counts[s]) {
					c->rx_ring_full += counts[s] - k;
					rte_pktmbuf_free_bulk(&steered[s][k], counts[s] - k);
				}
			}
		}
		/* Frames the queue refused stay in pend and go first next time;
		 * nothing new is taken from the shards' rings until they are out,
		 * so a full queue pushes back on the shards instead of dropping. */
		if (npend) {
			uint16_t sent = rte_eth_tx_burst(c->port, c->txq, pend + pstart, npend);
			c->tx_pkts += sent;
			pstart += sent;
			npend -= sent;
			work += sent;
		}
		rr = rr + 1 >= c->nshards ? 0 : rr + 1; /* start with another shard each time: fairness */
		for (unsigned j = 0; j < c->nshards && !npend; j++) {
			unsigned s = rr + j < c->nshards ? rr + j : rr + j - c->nshards;
			unsigned k = rte_ring_dequeue_burst(c->tx[s], (void **)pend, burst, NULL);
			if (!k)
				continue;
			work += k;
			uint16_t sent = rte_eth_tx_burst(c->port, c->txq, pend, k);
			c->tx_pkts += sent;
			pstart = sent;
			npend = k - sent;
		}
		if (work) {
			idle = 0;
			sleep_us = 1;
			continue;
		}
		if (++idle < c->idle_spins) {
			rte_pause();
			continue;
		}
		c->idle_sleeps++;
		rte_delay_us_sleep(sleep_us);
		sleep_us = sleep_us * 2 > c->max_sleep_us ? c->max_sleep_us : sleep_us * 2;
	}
	if (npend) { /* stopping: what the queue never took is freed */
		c->tx_dropped += npend;
		rte_pktmbuf_free_bulk(pend + pstart, npend);
	}
	return 0;
}

#endif
