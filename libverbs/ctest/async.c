/*
 * async.c: asynchronous events through the verbs API (ibv_get_async_event,
 * ibv_ack_async_event, ctx->async_fd), as a program of ours written against
 * <infiniband/verbs.h> sees them over metaroce. Two processes (pair.h):
 * the parent is the requester, the child the responder.
 *
 * Usage: async CASE
 *   quiet   an opened device has no event (no PORT_ACTIVE at open): poll()
 *           on async_fd times out, and with O_NONBLOCK ibv_get_async_event
 *           fails with EAGAIN; nothing comes while QPs work normally.
 *   commest the responder's QP stays in RTR; the first SEND it receives
 *           raises IBV_EVENT_COMM_EST for that QP (async_fd becomes
 *           readable, a blocking ibv_get_async_event returns it); the
 *           requester, in RTS, gets none.
 *   fatal   the responder is killed. QP 0's WRITE fails with
 *           IBV_WC_RETRY_EXC_ERR, which tells the program, and raises no
 *           event; QP 1, with only a receive posted, goes to the error
 *           state when the connection's peer-dead timer ends the session:
 *           IBV_EVENT_QP_FATAL for QP 1, its receive flushed. ibv_destroy_qp
 *           of QP 1 waits until the event is acknowledged.
 *   gone    as fatal, but QP 1 is destroyed before its event is taken: the
 *           event is dropped (a non-blocking ibv_get_async_event answers
 *           EAGAIN) and ibv_destroy_qp does not wait.
 *
 * Each case prints "case CASE: ..." lines with what it saw and the program
 * ends "N passed, M failed".
 */
#define PAIR_BUF 4096
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include "pair.h"

/* readable polls async_fd for up to ms. */
static int readable(struct ibv_context *c, int ms)
{
	struct pollfd p = {.fd = c->async_fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void quiet(struct side *s)
{
	CHECK(!readable(s->ctx, 50));
	int fl = fcntl(s->ctx->async_fd, F_GETFL);
	CHECK(fl >= 0 && fcntl(s->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_async_event ev;
	errno = 0;
	int r = ibv_get_async_event(s->ctx, &ev);
	CHECK(r == -1 && errno == EAGAIN);
	printf("case quiet: %s: no event at open (get: %s)\n", role, r ? strerror(errno) : "an event");
	/* Normal traffic raises nothing either. */
	if (!strcmp(role, "requester")) {
		struct ibv_wc wc;
		CHECK(post_rdma(s->qp[0], IBV_WR_RDMA_WRITE, 1, s->buf, s->mr->lkey, 64, s->peer.addr, s->peer.rkey) == 0);
		CHECK(wait_wc(s, &wc, 5000) && wc.status == IBV_WC_SUCCESS);
	}
	sync_peer(s->sock);
	CHECK(!readable(s->ctx, 100));
	CHECK(ibv_get_async_event(s->ctx, &ev) == -1 && errno == EAGAIN);
}

static void req_commest(struct side *s)
{
	sync_peer(s->sock); /* the responder's receive is posted */
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = 16, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	CHECK(ibv_post_send(s->qp[0], &wr, &bad) == 0);
	struct ibv_wc wc;
	CHECK(wait_wc(s, &wc, 5000) && wc.status == IBV_WC_SUCCESS);
	sync_peer(s->sock); /* the responder took its event */
	int r = readable(s->ctx, 100);
	CHECK(!r);
	printf("case commest: requester (RTS): %s\n", r ? "an event" : "no event");
}

static void resp_commest(struct side *s)
{
	CHECK(s->qp[0]->state == IBV_QPS_RTR);
	CHECK(post_recv(s->qp[0], 3, s->buf, 64, s->mr->lkey) == 0);
	sync_peer(s->sock);
	struct ibv_wc wc;
	CHECK(wait_wc(s, &wc, 5000) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 16);
	int r = readable(s->ctx, 2000);
	CHECK(r);
	struct ibv_async_event ev = {0};
	if (r) {
		CHECK(ibv_get_async_event(s->ctx, &ev) == 0); /* blocking fd: there is one */
		CHECK(ev.event_type == IBV_EVENT_COMM_EST && ev.element.qp == s->qp[0]);
		printf("case commest: responder (RTR): %s for QP %s\n", ibv_event_type_str(ev.event_type),
		       ev.element.qp == s->qp[0] ? "0" : "?");
		ibv_ack_async_event(&ev);
		CHECK(s->qp[0]->events_completed == 1);
	}
	CHECK(!readable(s->ctx, 50)); /* one event, once */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7};
	CHECK(ibv_modify_qp(s->qp[0], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY) == 0);
	sync_peer(s->sock);
}

/* The connection's peer-dead timer (2 s for verbs: docs/verbs.md), and a
 * loaded machine's slack. */
#define FATAL_WAIT_MS 6000

static struct ibv_async_event acked_ev;
static double acked_at;
static void *ack_later(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
	acked_at = now_ms();
	ibv_ack_async_event(&acked_ev);
	return NULL;
}

static void req_fatal(struct side *s, pid_t child)
{
	CHECK(post_recv(s->qp[1], 20, s->buf + 2048, 64, s->mr->lkey) == 0);
	struct ibv_wc wc = {0};
	CHECK(post_rdma(s->qp[0], IBV_WR_RDMA_WRITE, 10, s->buf, s->mr->lkey, 64, s->peer.addr, s->peer.rkey) == 0);
	CHECK(wait_wc(s, &wc, 5000) && wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	double t0 = now_ms();
	CHECK(post_rdma(s->qp[0], IBV_WR_RDMA_WRITE, 11, s->buf, s->mr->lkey, 64, s->peer.addr, s->peer.rkey) == 0);
	int got = wait_wc(s, &wc, 5000);
	CHECK(got && wc.wr_id == 11 && wc.status == IBV_WC_RETRY_EXC_ERR);
	printf("case fatal: QP 0 WRITE %s after %.0f ms\n", got ? ibv_wc_status_str(wc.status) : "none", now_ms() - t0);
	int r = readable(s->ctx, FATAL_WAIT_MS);
	double dt = now_ms() - t0;
	CHECK(r);
	struct ibv_async_event ev = {0};
	if (!r) {
		printf("case fatal: no event within %d ms\n", FATAL_WAIT_MS);
		return;
	}
	CHECK(ibv_get_async_event(s->ctx, &ev) == 0);
	int which = ev.element.qp == s->qp[0] ? 0 : ev.element.qp == s->qp[1] ? 1 : -1;
	CHECK(ev.event_type == IBV_EVENT_QP_FATAL && which == 1);
	printf("case fatal: %s for QP %d after %.0f ms\n", ibv_event_type_str(ev.event_type), which, dt);
	/* QP 1's receive was flushed; QP 0's error completion raised nothing. */
	got = wait_wc(s, &wc, 2000);
	CHECK(got && wc.wr_id == 20 && wc.status == IBV_WC_WR_FLUSH_ERR);
	printf("case fatal: QP 1 receive %s (wr_id %llu, qp_num %#x)\n", got ? ibv_wc_status_str(wc.status) : "none",
	       (unsigned long long)wc.wr_id, wc.qp_num);
	CHECK(!readable(s->ctx, 300));
	/* ibv_destroy_qp waits for the acknowledgement (events_completed). */
	acked_ev = ev;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, ack_later, NULL) == 0);
	double d0 = now_ms();
	CHECK(ibv_destroy_qp(s->qp[1]) == 0);
	double d1 = now_ms();
	pthread_join(th, NULL);
	CHECK(d1 >= acked_at);
	printf("case fatal: ibv_destroy_qp returned %.0f ms after the call, %s the acknowledgement\n", d1 - d0,
	       d1 >= acked_at ? "after" : "BEFORE");
	CHECK(ibv_destroy_qp(s->qp[0]) == 0);
}

static void req_gone(struct side *s, pid_t child)
{
	CHECK(post_recv(s->qp[1], 20, s->buf + 2048, 64, s->mr->lkey) == 0);
	struct ibv_wc wc = {0};
	CHECK(post_rdma(s->qp[0], IBV_WR_RDMA_WRITE, 10, s->buf, s->mr->lkey, 64, s->peer.addr, s->peer.rkey) == 0);
	CHECK(wait_wc(s, &wc, 5000) && wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* QP 0's own failure (an error completion, no event), as in fatal:
	 * the only event is QP 1's. */
	CHECK(post_rdma(s->qp[0], IBV_WR_RDMA_WRITE, 11, s->buf, s->mr->lkey, 64, s->peer.addr, s->peer.rkey) == 0);
	CHECK(wait_wc(s, &wc, 5000) && wc.wr_id == 11 && wc.status == IBV_WC_RETRY_EXC_ERR);
	int r = readable(s->ctx, FATAL_WAIT_MS);
	CHECK(r);
	printf("case gone: an event %s\n", r ? "is queued" : "never came");
	double d0 = now_ms();
	CHECK(ibv_destroy_qp(s->qp[1]) == 0);
	double dt = now_ms() - d0;
	CHECK(dt < 1000);
	int fl = fcntl(s->ctx->async_fd, F_GETFL);
	CHECK(fcntl(s->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	struct ibv_async_event ev;
	errno = 0;
	int g = ibv_get_async_event(s->ctx, &ev);
	CHECK(g == -1 && errno == EAGAIN);
	printf("case gone: ibv_destroy_qp took %.0f ms; then ibv_get_async_event: %s\n", dt,
	       g ? strerror(errno) : ibv_event_type_str(ev.event_type));
	CHECK(ibv_destroy_qp(s->qp[0]) == 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: async quiet|commest|fatal|gone\n");
		return 2;
	}
	const char *c = argv[1];
	uint8_t timeout = 14, retry = 7;
	int nqp = 1;
	int killed = !strcmp(c, "fatal") || !strcmp(c, "gone");
	if (killed)
		timeout = 12, retry = 3, nqp = 2; /* 4.096 us x 2^12 x 4 = 67 ms */
	struct side s = {0};
	pid_t child = pair_fork(&s);
	if (child == 0) {
		pair_stop_at_rtr = !strcmp(c, "commest");
		setup(&s, nqp, 0xee, timeout, retry, 7);
		if (!strcmp(c, "quiet"))
			quiet(&s);
		else if (!strcmp(c, "commest"))
			resp_commest(&s);
		else if (killed)
			pause(); /* killed by the requester */
		pair_send_counts(&s);
		_exit(0);
	}
	setup(&s, nqp, 0, timeout, retry, 7);
	if (!strcmp(c, "quiet"))
		quiet(&s);
	else if (!strcmp(c, "commest"))
		req_commest(&s);
	else if (!strcmp(c, "fatal"))
		req_fatal(&s, child);
	else if (!strcmp(c, "gone"))
		req_gone(&s, child);
	else {
		fprintf(stderr, "unknown case %s\n", c);
		kill(child, SIGKILL);
		return 2;
	}
	if (!killed) {
		pair_add_counts(&s);
		pair_reap(child);
	}
	return pair_result();
}
