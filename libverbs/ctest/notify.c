/*
 * notify.c: completion channels and polling an empty CQ, two processes
 * (pair.h).
 *
 *  - A CQ armed (ibv_req_notify_cq) while it already holds completions
 *    raises no event for them (ibv_req_notify_cq(3): the event is for the
 *    next completion added; the program polls after arming). perftest's
 *    -e loops arm before they poll the completion their event was for,
 *    and count on one event per completion.
 *  - A CQ armed empty raises nothing until a completion comes, then one
 *    event; poll() on the channel fd sees it.
 *  - A requester that sends and is answered at once (the responder
 *    spinning on its CQ, so that the library runs the transport on the
 *    polling and posting threads) has its send completion before the
 *    answer's receive completion, every time: perftest's -e loops wait
 *    for the one and then the other.
 *  - ibv_poll_cq on an empty CQ returns 0 promptly even once the
 *    library's poll wait (cqwait.c) naps (each call within a second: the
 *    naps are 200 us, the rest is the host's scheduling).
 *
 * Ends "N passed, M failed".
 */
#define PAIR_BUF (1u << 20)
#define PINGS 100
#include "pair.h"
#include <poll.h>

static int readable(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* take_event takes one event for s->cq and acknowledges it. */
static int take_event(struct side *s)
{
	struct ibv_cq *cq;
	void *cqctx;
	if (ibv_get_cq_event(s->ch, &cq, &cqctx))
		return 0;
	ibv_ack_cq_events(cq, 1);
	return cq == s->cq;
}

static void requester(struct side *s)
{
	for (int i = 0; i < 3; i++)
		CHECK(post_recv(s->qp[0], (uint64_t)i, s->buf + i * 64, 64, s->mr->lkey) == 0);
	/* 1: two SENDs land before the CQ is armed. */
	sync_peer(s->sock); /* the responder sends two and sees them acknowledged */
	sync_peer(s->sock);
	usleep(100 * 1000); /* the engine has pushed both receives into the ring */
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	int ev = readable(s->ch, 100);
	CHECK(!ev);
	printf("armed with 2 completions waiting: %s\n", ev ? "an event (WRONG)" : "no event");
	if (ev)
		take_event(s);
	struct ibv_wc wc[4];
	int n = 0;
	for (int k = 0; k < 2 && n < 2; k++) {
		struct ibv_wc w;
		if (wait_wc(s, &w, 2000))
			wc[n++] = w;
	}
	CHECK(n == 2 && wc[0].wr_id == 0 && wc[1].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS);
	/* 2: armed on an empty CQ: nothing, until the third SEND. */
	CHECK(ibv_req_notify_cq(s->cq, 0) == 0);
	int early = readable(s->ch, 50);
	CHECK(!early);
	sync_peer(s->sock); /* the responder sends the third */
	ev = readable(s->ch, 5000);
	CHECK(ev);
	printf("armed empty: event %s, %s\n", early ? "before the completion (WRONG)" : "none before the completion",
	       ev ? "one after it" : "NONE after it");
	if (ev)
		CHECK(take_event(s));
	struct ibv_wc w;
	CHECK(wait_wc(s, &w, 2000) && w.wr_id == 2 && w.status == IBV_WC_SUCCESS);
	CHECK(!readable(s->ch, 50)); /* one event for one completion */
	/* 3: ping-pongs: our send completion comes before the answer. */
	int inorder = 0;
	for (int i = 0; i < PINGS; i++) {
		CHECK(post_recv(s->qp[0], 100 + (uint64_t)i, s->buf + 4096, 64, s->mr->lkey) == 0);
		CHECK(post_rdma(s->qp[0], IBV_WR_SEND, 200 + (uint64_t)i, s->buf, s->mr->lkey, 16, 0, 0) == 0);
		struct ibv_wc a, b;
		int got = wait_wc(s, &a, 5000) && wait_wc(s, &b, 5000);
		inorder += got && a.wr_id == 200 + (uint64_t)i && a.opcode == IBV_WC_SEND && b.wr_id == 100 + (uint64_t)i &&
			   b.opcode == IBV_WC_RECV;
	}
	CHECK(inorder == PINGS);
	printf("%d ping-pongs: the send completion before the answer's receive in %d\n", PINGS, inorder);
	/* 4: polling an empty CQ returns 0 within a bounded time per call,
	 * through the spin and the naps. */
	double worst = 0, start = now_ms();
	int zeros = 0;
	for (int i = 0; i < 2000; i++) {
		double t = now_ms();
		zeros += ibv_poll_cq(s->cq, 1, &w) == 0;
		if (now_ms() - t > worst)
			worst = now_ms() - t;
	}
	CHECK(zeros == 2000);
	CHECK(worst < 1000); /* returns, never waits for a completion: a bound the host's scheduling cannot break */
	printf("2000 polls of an empty CQ: %d returned 0, %.1f ms in all, the longest %.3f ms\n", zeros,
	       now_ms() - start, worst);
	sync_peer(s->sock);
}

static void responder(struct side *s)
{
	for (int i = 0; i < PINGS; i++)
		CHECK(post_recv(s->qp[0], 100 + (uint64_t)i, s->buf + 4096, 64, s->mr->lkey) == 0);
	struct ibv_wc w;
	sync_peer(s->sock);
	for (int i = 0; i < 2; i++)
		CHECK(post_rdma(s->qp[0], IBV_WR_SEND, (uint64_t)i, s->buf, s->mr->lkey, 16, 0, 0) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(wait_wc(s, &w, 5000) && w.status == IBV_WC_SUCCESS);
	sync_peer(s->sock);
	sync_peer(s->sock);
	CHECK(post_rdma(s->qp[0], IBV_WR_SEND, 2, s->buf, s->mr->lkey, 16, 0, 0) == 0);
	CHECK(wait_wc(s, &w, 5000) && w.status == IBV_WC_SUCCESS);
	/* 3: answer each ping at once (spinning, as perftest's server). */
	int answered = 0;
	for (int i = 0; i < PINGS; i++) {
		int n;
		double end = now_ms() + 5000;
		while ((n = ibv_poll_cq(s->cq, 1, &w)) == 0 && now_ms() < end)
			;
		if (n == 1 && w.opcode == IBV_WC_SEND) { /* our previous answer's completion */
			while ((n = ibv_poll_cq(s->cq, 1, &w)) == 0 && now_ms() < end)
				;
		}
		if (n != 1 || w.opcode != IBV_WC_RECV)
			break;
		CHECK(post_rdma(s->qp[0], IBV_WR_SEND, 300 + (uint64_t)i, s->buf, s->mr->lkey, 16, 0, 0) == 0);
		answered++;
	}
	CHECK(answered == PINGS);
	sync_peer(s->sock);
}

int main(void)
{
	struct side s = {0};
	pid_t child = pair_fork(&s);
	pair_with_channel = child != 0;
	if (child == 0) {
		setup(&s, 1, 0, 14, 7, 7);
		responder(&s);
		pair_send_counts(&s);
		_exit(0);
	}
	setup(&s, 1, 0, 14, 7, 7);
	requester(&s);
	pair_add_counts(&s);
	pair_reap(child);
	return pair_result();
}
