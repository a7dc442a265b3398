/*
 * pair.h: the two-process harness of the C tests (errpaths.c, integrity.c,
 * notify.c, async.c, wrex.c). The
 * process forks before it opens the device (a child forked before the Go
 * runtime starts opens its own: fork.c); requester (parent) and responder
 * (child) each open a device, create QPs and a PAIR_BUF-byte region, swap
 * QPNs, GIDs, addresses and rkeys over a socketpair and take the QPs to
 * RTS. The includer defines PAIR_BUF. CHECK counts passed and failed.
 */
#ifndef PAIR_H
#define PAIR_H
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

static int passed, failed;
static const char *role = "requester";
#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (cond)                                                                  \
			passed++;                                                          \
		else {                                                                     \
			failed++;                                                          \
			fprintf(stderr, "FAIL %s %s:%d: %s\n", role, __FILE__, __LINE__, #cond); \
		}                                                                          \
	} while (0)

#ifndef PAIR_BUF
#error define PAIR_BUF (the region size) before including pair.h
#endif
#define MAXQP 2

/* Set before setup: the side exits right after the exchange (never
 * reaching RTR); setup ends without the final handshake. */
static int pair_die_after_exchange, pair_no_sync;
/* Set before setup: the CQ gets a completion channel (side.ch). */
static int pair_with_channel;

/* Set before setup: the QPs stay in RTR (pair_stop_at_rtr), or are
 * created with ibv_create_qp_ex and these send_ops_flags (pair_send_ops,
 * for the ibv_wr_* API). */
static int pair_stop_at_rtr;
static uint64_t pair_send_ops;

/* Set before setup: the CQ is created with ibv_create_cq_ex and these
 * wc_flags (side.cqx; side.cq is ibv_cq_ex_to_cq of it). */
static uint64_t pair_cq_ex_flags;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* What one side tells the other. */
struct info {
	uint32_t qpn[MAXQP];
	union ibv_gid gid;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch; /* pair_with_channel */
	struct ibv_cq_ex *cqx; /* when pair_cq_ex_flags */
	struct ibv_qp *qp[MAXQP];
	struct ibv_mr *mr;
	uint8_t *buf;
	struct info peer;
	int sock;
};

static void xfer(int fd, void *p, size_t n, int out)
{
	uint8_t *b = p;
	while (n > 0) {
		ssize_t k = out ? write(fd, b, n) : read(fd, b, n);
		if (k <= 0) {
			fprintf(stderr, "%s: socket %s: %s\n", role, out ? "write" : "read", k ? strerror(errno) : "EOF");
			exit(2);
		}
		b += k, n -= (size_t)k;
	}
}
static void put(int fd, const void *p, size_t n) { xfer(fd, (void *)p, n, 1); }
static void get(int fd, void *p, size_t n) { xfer(fd, p, n, 0); }
static inline void sync_peer(int fd)
{
	char c = 's';
	put(fd, &c, 1);
	get(fd, &c, 1);
}

/* setup opens the device, creates nqp QPs and a PAIR_BUF-byte MR filled with
 * fill, swaps infos and takes every QP to RTS with the given budgets. */
static void setup(struct side *s, int nqp, uint8_t fill, uint8_t timeout, uint8_t retry, uint8_t rnr)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(s->ctx = ibv_open_device(list[0]))) {
		fprintf(stderr, "%s: no device\n", role);
		exit(2);
	}
	s->pd = ibv_alloc_pd(s->ctx);
	if (pair_cq_ex_flags) {
		struct ibv_cq_init_attr_ex ca = {.cqe = 256, .wc_flags = pair_cq_ex_flags};
		s->cqx = ibv_create_cq_ex(s->ctx, &ca);
		s->cq = s->cqx ? ibv_cq_ex_to_cq(s->cqx) : NULL;
	} else {
		if (pair_with_channel && !(s->ch = ibv_create_comp_channel(s->ctx))) {
			fprintf(stderr, "%s: comp channel: %s\n", role, strerror(errno));
			exit(2);
		}
		s->cq = ibv_create_cq(s->ctx, 256, NULL, s->ch, 0);
	}
	s->buf = aligned_alloc(4096, PAIR_BUF);
	memset(s->buf, fill, PAIR_BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, PAIR_BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!s->pd || !s->cq || !s->mr) {
		fprintf(stderr, "%s: pd/cq/mr: %s\n", role, strerror(errno));
		exit(2);
	}
	struct info me = {.addr = (uintptr_t)s->buf, .rkey = s->mr->rkey, .len = PAIR_BUF};
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_init_attr_ex ia = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
						 .cap = {.max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 1, .max_recv_sge = 1},
						 .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = s->pd};
		if (pair_send_ops) {
			ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.send_ops_flags = pair_send_ops;
			s->qp[i] = ibv_create_qp_ex(s->ctx, &ia);
		} else
			s->qp[i] = ibv_create_qp(s->pd, (struct ibv_qp_init_attr *)&ia);
		if (!s->qp[i]) {
			fprintf(stderr, "%s: create_qp: %s\n", role, strerror(errno));
			exit(2);
		}
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
					.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
		if (ibv_modify_qp(s->qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
			fprintf(stderr, "%s: INIT failed\n", role);
			exit(2);
		}
		me.qpn[i] = s->qp[i]->qp_num;
	}
	ibv_query_gid(s->ctx, 1, 0, &me.gid);
	put(s->sock, &me, sizeof me);
	get(s->sock, &s->peer, sizeof s->peer);
	if (pair_die_after_exchange)
		_exit(0); /* a peer that dies before its RTR */
	for (int i = 0; i < nqp; i++) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = s->peer.qpn[i],
					.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
					.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = s->peer.gid, .hop_limit = 1}}};
		if (ibv_modify_qp(s->qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
			fprintf(stderr, "%s: RTR failed\n", role);
			exit(2);
		}
		if (pair_stop_at_rtr)
			continue;
		struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .timeout = timeout, .retry_cnt = retry,
					.rnr_retry = rnr, .max_rd_atomic = 1};
		if (ibv_modify_qp(s->qp[i], &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
			fprintf(stderr, "%s: RTS failed\n", role);
			exit(2);
		}
	}
	if (!pair_no_sync)
		sync_peer(s->sock);
}

/* wait_wc polls for one completion for up to ms; 0 if none came. */
static inline int wait_wc(struct side *s, struct ibv_wc *wc, double ms)
{
	double end = now_ms() + ms;
	while (now_ms() < end) {
		int n = ibv_poll_cq(s->cq, 1, wc);
		if (n > 0)
			return 1;
		if (n < 0)
			return 0;
		usleep(100);
	}
	return 0;
}

static inline int post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wrid, void *local, uint32_t lkey,
		     uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wrid, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static inline int post_recv(struct ibv_qp *qp, uint64_t wrid, void *buf, uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = wrid, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static inline int all(const uint8_t *b, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

/* pair_fork makes the two processes, joined by a socketpair: it returns
 * the child's pid in the parent (the requester) and 0 in the child (the
 * responder, whose role it sets), with s->sock that process's end and
 * stdout line-buffered so the two processes' lines do not interleave
 * mid-line. It exits 2 when it cannot. */
static pid_t pair_fork(struct side *s)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		exit(2);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		exit(2);
	}
	s->sock = child ? sv[0] : sv[1];
	close(child ? sv[1] : sv[0]);
	if (child == 0)
		role = "responder";
	return child;
}

/* pair_send_counts (responder) and pair_add_counts (requester): the
 * responder's CHECK counts join the requester's. */
static inline void pair_send_counts(struct side *s)
{
	int counts[2] = {passed, failed};
	put(s->sock, counts, sizeof counts);
}

static inline void pair_add_counts(struct side *s)
{
	int counts[2];
	get(s->sock, counts, sizeof counts);
	passed += counts[0], failed += counts[1];
}

/* pair_reap waits for the responder, which must have exited 0. */
static inline void pair_reap(pid_t child)
{
	int st;
	waitpid(child, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* pair_result prints the tally the Go test parses; the exit status. */
static inline int pair_result(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#endif
