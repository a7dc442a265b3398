/*
 * wrex.c: the ibv_wr_* posting API (ibv_create_qp_ex, struct ibv_qp_ex) and
 * ibv_query_qp_data_in_order, as a program of ours written against
 * <infiniband/verbs.h> uses them over the library. Two processes
 * (pair.h), both QPs created with ibv_create_qp_ex and send_ops_flags for
 * the five supported opcodes; the parent posts, the child's memory and
 * receives are checked.
 *
 * Usage: wrex CASE
 *   ops      every supported wr_* call moves data that the other side
 *            checks: wr_rdma_write, wr_rdma_write_imm, wr_send (with
 *            wr_set_sge_list of one SGE), wr_send_imm (wr_set_inline_data,
 *            the source overwritten right after wr_complete), wr_send with
 *            wr_set_inline_data_list, wr_send with IBV_SEND_INLINE in
 *            wr_flags and wr_set_sge (ibv_rc_pingpong -N's way),
 *            wr_rdma_read, and a batch of three WRITEs whose middle one
 *            is unsignaled; each completion's wr_id, opcode and status.
 *   refuse   what the library does not offer fails cleanly: create_qp_ex
 *            with atomics in send_ops_flags or create flags (EOPNOTSUPP),
 *            ibv_qp_to_qp_ex of a QP made by ibv_create_qp (NULL); in a
 *            batch, every unsupported operation (EOPNOTSUPP from
 *            wr_complete), two SGEs, oversized inline data, inline data for
 *            a READ, data without an operation (EINVAL), more work
 *            requests than the send queue (ENOMEM), wr_complete without
 *            wr_start (EINVAL); an empty batch is fine; wr_abort discards; a failed or aborted
 *            batch posts nothing, and the QP works afterwards.
 *   cqex     both CQs made by ibv_create_cq_ex (wc_flags BYTE_LEN, IMM,
 *            QP_NUM): ibv_start_poll/ibv_next_poll/ibv_end_poll and the
 *            ibv_wc_read_* calls report a batch of four work requests and
 *            the responder's receives (opcode, byte_len, immediate, flags,
 *            QP number), start_poll on an empty CQ says ENOENT, and a CQ
 *            asking for completion timestamps is refused (EOPNOTSUPP: the
 *            device has no clock).
 *   inorder  ibv_query_qp_data_in_order answers for the transport
 *            (METAROCE_TRANSPORT, default metaroce): flags 0 gives 1 or 0,
 *            flags IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS (1, rdma-core 47)
 *            the capability bits, any other flag 0.
 *
 * Each case prints "case CASE: ..." lines and the program ends "N passed,
 * M failed".
 */
#define PAIR_BUF 65536
#include "pair.h"

#define OPS                                                                                    \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ)

/* The responder's region: where each operation lands. */
#define W_OFF 0         /* WRITE, 4096 bytes */
#define WI_OFF 8192     /* WRITE_IMM, 1000 bytes */
#define RD_OFF 32768    /* READ source, 2048 bytes */
#define B_OFF 40960     /* the batch's three WRITEs, 256 bytes each */
#define RECV_OFF 16384  /* receives, 1024 bytes each */
#define NRECV 5
#define IMM1 0x11223344u
#define IMM2 0x55667788u

static uint8_t pat(size_t i, int seed) { return (uint8_t)(i * 7 + seed * 31 + 1); }
static void fill(uint8_t *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i, seed);
}
static int same(const uint8_t *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(i, seed))
			return 0;
	return 1;
}

/* done waits for one completion and checks it. */
static void done(struct side *s, const char *what, uint64_t wrid, enum ibv_wc_opcode op)
{
	struct ibv_wc wc = {0};
	int got = wait_wc(s, &wc, 5000);
	CHECK(got && wc.wr_id == wrid && wc.status == IBV_WC_SUCCESS && wc.opcode == op);
	printf("case ops: %s: %s, wr_id %llu\n", what, got ? ibv_wc_status_str(wc.status) : "no completion",
	       (unsigned long long)wc.wr_id);
}

static void req_ops(struct side *s)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(s->qp[0]);
	CHECK(x != NULL && &x->qp_base == s->qp[0]);
	if (!x)
		return;
	uint8_t *b = s->buf;
	uint32_t lk = s->mr->lkey, rk = s->peer.rkey;
	uint64_t ra = s->peer.addr;
	sync_peer(s->sock); /* the responder's receives are posted */

	fill(b, 4096, 1);
	ibv_wr_start(x);
	x->wr_id = 101;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rk, ra + W_OFF);
	ibv_wr_set_sge(x, lk, (uintptr_t)b, 4096);
	CHECK(ibv_wr_complete(x) == 0);
	done(s, "wr_rdma_write", 101, IBV_WC_RDMA_WRITE);

	fill(b, 1000, 2);
	ibv_wr_start(x);
	x->wr_id = 102;
	ibv_wr_rdma_write_imm(x, rk, ra + WI_OFF, htobe32(IMM1));
	ibv_wr_set_sge(x, lk, (uintptr_t)b, 1000);
	CHECK(ibv_wr_complete(x) == 0);
	done(s, "wr_rdma_write_imm", 102, IBV_WC_RDMA_WRITE);

	fill(b, 512, 3);
	struct ibv_sge one = {.addr = (uintptr_t)b, .length = 512, .lkey = lk};
	ibv_wr_start(x);
	x->wr_id = 103;
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, 1, &one);
	CHECK(ibv_wr_complete(x) == 0);
	done(s, "wr_send + wr_set_sge_list", 103, IBV_WC_SEND);

	uint8_t tmp[256];
	fill(tmp, 100, 4);
	ibv_wr_start(x);
	x->wr_id = 104;
	ibv_wr_send_imm(x, htobe32(IMM2));
	ibv_wr_set_inline_data(x, tmp, 100);
	CHECK(ibv_wr_complete(x) == 0);
	memset(tmp, 0, sizeof tmp); /* inline: copied at post time */
	done(s, "wr_send_imm + wr_set_inline_data", 104, IBV_WC_SEND);

	uint8_t p1[20], p2[30], p3[10];
	uint8_t all60[60];
	fill(all60, 60, 5);
	memcpy(p1, all60, 20), memcpy(p2, all60 + 20, 30), memcpy(p3, all60 + 50, 10);
	struct ibv_data_buf bufs[3] = {{p1, 20}, {p2, 30}, {p3, 10}};
	ibv_wr_start(x);
	x->wr_id = 105;
	ibv_wr_send(x);
	ibv_wr_set_inline_data_list(x, 3, bufs);
	CHECK(ibv_wr_complete(x) == 0);
	memset(p1, 0, 20), memset(p2, 0, 30), memset(p3, 0, 10);
	done(s, "wr_send + wr_set_inline_data_list", 105, IBV_WC_SEND);

	fill(b + 1024, 64, 6);
	ibv_wr_start(x);
	x->wr_id = 106;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, lk, (uintptr_t)(b + 1024), 64);
	CHECK(ibv_wr_complete(x) == 0);
	memset(b + 1024, 0, 64);
	done(s, "wr_send with IBV_SEND_INLINE + wr_set_sge", 106, IBV_WC_SEND);

	memset(b + 4096, 0, 2048);
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_start(x);
	x->wr_id = 107;
	ibv_wr_rdma_read(x, rk, ra + RD_OFF);
	ibv_wr_set_sge(x, lk, (uintptr_t)(b + 4096), 2048);
	CHECK(ibv_wr_complete(x) == 0);
	done(s, "wr_rdma_read", 107, IBV_WC_RDMA_READ);
	int rd = same(b + 4096, 2048, 7);
	CHECK(rd);
	printf("case ops: READ data %s\n", rd ? "intact" : "WRONG");

	/* A batch: three WRITEs, one crossing; the middle one unsignaled. */
	for (int i = 0; i < 3; i++)
		fill(b + 8192 + 256 * i, 256, 10 + i);
	ibv_wr_start(x);
	for (int i = 0; i < 3; i++) {
		x->wr_id = 201 + i;
		x->wr_flags = i == 1 ? 0 : IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, rk, ra + B_OFF + 256 * i);
		ibv_wr_set_sge(x, lk, (uintptr_t)(b + 8192 + 256 * i), 256);
	}
	CHECK(ibv_wr_complete(x) == 0);
	done(s, "batch WRITE 1/3", 201, IBV_WC_RDMA_WRITE);
	done(s, "batch WRITE 3/3 (2/3 unsignaled)", 203, IBV_WC_RDMA_WRITE);
	struct ibv_wc wc;
	CHECK(!wait_wc(s, &wc, 100)); /* the unsignaled one completed silently */
	sync_peer(s->sock); /* all landed: the responder checks */
	sync_peer(s->sock);
}

/* recv_done waits for the next receive completion and checks it. */
static void recv_done(struct side *s, const char *what, uint64_t wrid, enum ibv_wc_opcode op, uint32_t len,
		      int with_imm, uint32_t imm)
{
	struct ibv_wc wc = {0};
	int got = wait_wc(s, &wc, 5000);
	int ok = got && wc.wr_id == wrid && wc.status == IBV_WC_SUCCESS && wc.opcode == op && wc.byte_len == len &&
		 !!(wc.wc_flags & IBV_WC_WITH_IMM) == with_imm && (!with_imm || be32toh(wc.imm_data) == imm);
	CHECK(ok);
	printf("case ops: responder %s: %s, %u bytes%s\n", what, got ? ibv_wc_status_str(wc.status) : "none",
	       wc.byte_len, ok ? "" : " (WRONG)");
}

static void resp_ops(struct side *s)
{
	for (int i = 0; i < NRECV; i++)
		CHECK(post_recv(s->qp[0], 300 + i, s->buf + RECV_OFF + 1024 * i, 1024, s->mr->lkey) == 0);
	fill(s->buf + RD_OFF, 2048, 7);
	sync_peer(s->sock);
	sync_peer(s->sock); /* the requester is done */
	recv_done(s, "WRITE_IMM", 300, IBV_WC_RECV_RDMA_WITH_IMM, 1000, 1, IMM1);
	recv_done(s, "SEND", 301, IBV_WC_RECV, 512, 0, 0);
	recv_done(s, "SEND_IMM inline", 302, IBV_WC_RECV, 100, 1, IMM2);
	recv_done(s, "SEND inline list", 303, IBV_WC_RECV, 60, 0, 0);
	recv_done(s, "SEND IBV_SEND_INLINE", 304, IBV_WC_RECV, 64, 0, 0);
	uint8_t *b = s->buf;
	int parts[] = {same(b + W_OFF, 4096, 1), all(b + W_OFF + 4096, 64, 0xee), same(b + WI_OFF, 1000, 2),
		       /* receive 300 was consumed by the WRITE_IMM, whose data went to WI_OFF */
		       all(b + RECV_OFF, 1024, 0xee), same(b + RECV_OFF + 1024, 512, 3), same(b + RECV_OFF + 2048, 100, 4),
		       same(b + RECV_OFF + 3072, 60, 5), same(b + RECV_OFF + 4096, 64, 6), all(b + RECV_OFF + 4096 + 64, 64, 0xee),
		       same(b + B_OFF, 256, 10), same(b + B_OFF + 256, 256, 11), same(b + B_OFF + 512, 256, 12)};
	int ok = 1;
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		if (!parts[i])
			printf("case ops: responder memory part %zu wrong\n", i);
		ok = ok && parts[i];
	}
	CHECK(ok);
	printf("case ops: responder memory %s\n", ok ? "as written, nothing past it" : "WRONG");
	sync_peer(s->sock);
}

/* expect_batch_err runs one batch built by build and checks that
 * wr_complete returns want. */
#define BATCH(name, want, ...)                                                          \
	do {                                                                            \
		ibv_wr_start(x);                                                        \
		x->wr_id = 900;                                                         \
		x->wr_flags = IBV_SEND_SIGNALED;                                        \
		__VA_ARGS__;                                                            \
		int e_ = ibv_wr_complete(x);                                            \
		CHECK(e_ == (want));                                                    \
		printf("case refuse: %s: wr_complete %s\n", name, e_ ? strerror(e_) : "0"); \
	} while (0)

static void req_refuse(struct side *s)
{
	/* Creation. */
	struct ibv_qp_init_attr_ex ia = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
					 .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
					 .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = s->pd,
					 .send_ops_flags = OPS | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP};
	errno = 0;
	struct ibv_qp *q = ibv_create_qp_ex(s->ctx, &ia);
	CHECK(!q && errno == EOPNOTSUPP);
	printf("case refuse: create_qp_ex with atomics: %s\n", q ? "created" : strerror(errno));
	ia.send_ops_flags = OPS;
	ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	errno = 0;
	q = ibv_create_qp_ex(s->ctx, &ia);
	CHECK(!q && errno == EOPNOTSUPP);
	printf("case refuse: create_qp_ex with create flags: %s\n", q ? "created" : strerror(errno));
	struct ibv_qp_init_attr pa = {.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	q = ibv_create_qp(s->pd, &pa);
	CHECK(q != NULL);
	if (q) {
		struct ibv_qp_ex *px = ibv_qp_to_qp_ex(q);
		CHECK(px == NULL);
		printf("case refuse: ibv_qp_to_qp_ex of an ibv_create_qp QP: %s\n", px ? "a table" : "NULL");
		CHECK(ibv_destroy_qp(q) == 0);
	}

	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(s->qp[0]);
	CHECK(x != NULL);
	if (!x)
		return;
	uint8_t *b = s->buf;
	uint32_t lk = s->mr->lkey, rk = s->peer.rkey;
	/* Where a refused batch would write: the check at the end sees it. */
	uint64_t ra = s->peer.addr + 1024;
	memset(b, 0x77, 64);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(s->qp[0], &qa, IBV_QP_CAP, &qi) == 0);
	size_t inl = qi.cap.max_inline_data;
	CHECK(inl > 0 && inl < 4096);
	static uint8_t big[4096];
	struct ibv_sge two[2] = {{(uintptr_t)b, 8, lk}, {(uintptr_t)(b + 8), 8, lk}};
	struct ibv_mw_bind_info bi = {0};
	uint64_t atomic_arg[2] = {0, 0};

	CHECK(ibv_wr_complete(x) == EINVAL); /* no ibv_wr_start */
	printf("case refuse: wr_complete without wr_start: %s\n", strerror(EINVAL));
	BATCH("an empty batch", 0, (void)0);
	BATCH("atomic_cmp_swp", EOPNOTSUPP, ibv_wr_atomic_cmp_swp(x, rk, ra, 0, 1); ibv_wr_set_sge(x, lk, (uintptr_t)b, 8));
	BATCH("atomic_fetch_add", EOPNOTSUPP, ibv_wr_atomic_fetch_add(x, rk, ra, 1); ibv_wr_set_sge(x, lk, (uintptr_t)b, 8));
	BATCH("atomic_write", EOPNOTSUPP, ibv_wr_atomic_write(x, rk, ra, atomic_arg));
	BATCH("bind_mw", EOPNOTSUPP, ibv_wr_bind_mw(x, NULL, 0, &bi));
	BATCH("local_inv", EOPNOTSUPP, ibv_wr_local_inv(x, 0));
	BATCH("send_inv", EOPNOTSUPP, ibv_wr_send_inv(x, 0));
	BATCH("send_tso", EOPNOTSUPP, ibv_wr_send_tso(x, b, 16, 1000));
	BATCH("set_ud_addr", EOPNOTSUPP, ibv_wr_send(x); ibv_wr_set_ud_addr(x, NULL, 1, 1); ibv_wr_set_sge(x, lk, (uintptr_t)b, 8));
	BATCH("set_xrc_srqn", EOPNOTSUPP, ibv_wr_send(x); ibv_wr_set_xrc_srqn(x, 1); ibv_wr_set_sge(x, lk, (uintptr_t)b, 8));
	BATCH("a good WRITE, then an atomic", EOPNOTSUPP, ibv_wr_rdma_write(x, rk, ra); ibv_wr_set_sge(x, lk, (uintptr_t)b, 8);
	      ibv_wr_atomic_fetch_add(x, rk, ra, 1));
	BATCH("two SGEs", EINVAL, ibv_wr_send(x); ibv_wr_set_sge_list(x, 2, two));
	BATCH("inline beyond max_inline_data", EINVAL, ibv_wr_send(x); ibv_wr_set_inline_data(x, big, inl + 1));
	BATCH("inline data for a READ", EINVAL, ibv_wr_rdma_read(x, rk, ra); ibv_wr_set_inline_data(x, b, 8));
	BATCH("data without an operation", EINVAL, ibv_wr_set_sge(x, lk, (uintptr_t)b, 8));
	BATCH("more WRs than the send queue", ENOMEM, for (int i = 0; i < 129; i++) {
		ibv_wr_rdma_write(x, rk, ra);
		ibv_wr_set_sge(x, lk, (uintptr_t)b, 8);
	});
	ibv_wr_start(x);
	x->wr_id = 901;
	ibv_wr_rdma_write(x, rk, ra);
	ibv_wr_set_sge(x, lk, (uintptr_t)b, 8);
	ibv_wr_abort(x);
	printf("case refuse: wr_abort: discarded\n");
	struct ibv_wc wc;
	int any = wait_wc(s, &wc, 200);
	CHECK(!any);
	printf("case refuse: completions from refused or aborted batches: %s\n", any ? "SOME" : "none");
	/* The QP still works: the mutex was released every time. */
	memset(b, 0x5c, 64);
	ibv_wr_start(x);
	x->wr_id = 902;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, rk, s->peer.addr);
	ibv_wr_set_sge(x, lk, (uintptr_t)b, 64);
	CHECK(ibv_wr_complete(x) == 0);
	int got = wait_wc(s, &wc, 5000);
	CHECK(got && wc.wr_id == 902 && wc.status == IBV_WC_SUCCESS);
	printf("case refuse: a WRITE afterwards: %s\n", got ? ibv_wc_status_str(wc.status) : "none");
	sync_peer(s->sock);
	sync_peer(s->sock);
}

static void resp_refuse(struct side *s)
{
	sync_peer(s->sock);
	/* Only the last WRITE landed: 64 bytes of 0x5c, the rest untouched. */
	int ok = all(s->buf, 64, 0x5c) && all(s->buf + 64, PAIR_BUF - 64, 0xee);
	CHECK(ok);
	printf("case refuse: responder memory: %s\n", ok ? "only the last WRITE landed" : "WRONG");
	sync_peer(s->sock);
}

#define CQEX_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM)

/* cqex_wait polls with start_poll until a batch starts (ENOENT: empty);
 * the caller ends it. */
static int cqex_wait(struct side *s, double ms)
{
	double end = now_ms() + ms;
	struct ibv_poll_cq_attr pa = {0};
	while (now_ms() < end) {
		int r = ibv_start_poll(s->cqx, &pa);
		if (r == 0)
			return 1;
		if (r != ENOENT)
			return 0;
		usleep(100);
	}
	return 0;
}

static void req_cqex(struct side *s)
{
	struct ibv_poll_cq_attr pa = {0};
	CHECK(s->cqx != NULL);
	if (!s->cqx)
		return;
	CHECK(ibv_start_poll(s->cqx, &pa) == ENOENT); /* empty: no end_poll */
	struct ibv_cq_init_attr_ex ca = {.cqe = 16, .wc_flags = CQEX_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	struct ibv_cq_ex *tcq = ibv_create_cq_ex(s->ctx, &ca);
	CHECK(!tcq && errno == EOPNOTSUPP);
	printf("case cqex: a CQ with completion timestamps: %s\n", tcq ? "created" : strerror(errno));
	sync_peer(s->sock); /* the responder's receives are posted */
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(s->qp[0]);
	uint8_t *b = s->buf;
	fill(b, 4096, 20);
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 401;
	ibv_wr_rdma_write(x, s->peer.rkey, s->peer.addr + W_OFF);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)b, 4096);
	x->wr_id = 402;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)b, 300);
	x->wr_id = 403;
	ibv_wr_rdma_write_imm(x, s->peer.rkey, s->peer.addr + WI_OFF, htobe32(IMM1));
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)b, 1000);
	x->wr_id = 404;
	ibv_wr_rdma_read(x, s->peer.rkey, s->peer.addr + RD_OFF);
	ibv_wr_set_sge(x, s->mr->lkey, (uintptr_t)(b + 8192), 2048);
	CHECK(ibv_wr_complete(x) == 0);
	static const enum ibv_wc_opcode want_op[4] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
						      IBV_WC_RDMA_READ};
	int seen = 0, ok = 1;
	while (seen < 4 && cqex_wait(s, 5000)) {
		int r = 0;
		for (; seen < 4 && r == 0; r = ibv_next_poll(s->cqx)) {
			ok = ok && s->cqx->status == IBV_WC_SUCCESS && s->cqx->wr_id == (uint64_t)(401 + seen) &&
			     ibv_wc_read_opcode(s->cqx) == want_op[seen] && ibv_wc_read_qp_num(s->cqx) == s->qp[0]->qp_num;
			seen++;
		}
		ibv_end_poll(s->cqx);
	}
	CHECK(seen == 4 && ok);
	printf("case cqex: requester read %d/4 completions by start/next/end_poll%s\n", seen, ok ? "" : " (WRONG)");
	sync_peer(s->sock);
	sync_peer(s->sock);
}

static void resp_cqex(struct side *s)
{
	for (int i = 0; i < 2; i++)
		CHECK(post_recv(s->qp[0], 500 + i, s->buf + RECV_OFF + 1024 * i, 1024, s->mr->lkey) == 0);
	fill(s->buf + RD_OFF, 2048, 7);
	sync_peer(s->sock);
	sync_peer(s->sock); /* the requester saw its four completions */
	int seen = 0, ok = 1;
	while (seen < 2 && cqex_wait(s, 5000)) {
		int r = 0;
		for (; seen < 2 && r == 0; r = ibv_next_poll(s->cqx)) {
			struct ibv_cq_ex *c = s->cqx;
			unsigned fl = ibv_wc_read_wc_flags(c);
			if (seen == 0)
				ok = ok && c->wr_id == 500 && ibv_wc_read_opcode(c) == IBV_WC_RECV &&
				     ibv_wc_read_byte_len(c) == 300 && !(fl & IBV_WC_WITH_IMM);
			else
				ok = ok && c->wr_id == 501 && ibv_wc_read_opcode(c) == IBV_WC_RECV_RDMA_WITH_IMM &&
				     ibv_wc_read_byte_len(c) == 1000 && (fl & IBV_WC_WITH_IMM) &&
				     be32toh(ibv_wc_read_imm_data(c)) == IMM1;
			ok = ok && c->status == IBV_WC_SUCCESS && ibv_wc_read_qp_num(c) == s->qp[0]->qp_num;
			seen++;
		}
		ibv_end_poll(s->cqx);
	}
	CHECK(seen == 2 && ok);
	printf("case cqex: responder read %d/2 receives (opcode, byte_len, immediate, flags, QP)%s\n", seen,
	       ok ? "" : " (WRONG)");
	CHECK(same(s->buf + W_OFF, 4096, 20) && same(s->buf + WI_OFF, 1000, 20));
	sync_peer(s->sock);
}

static void req_inorder(struct side *s)
{
	const char *t = getenv("METAROCE_TRANSPORT");
	int roce = t && !strcmp(t, "rocev2");
	struct ibv_qp *qp = s->qp[0];
	/* metaroce: only a WRITE's (WRITE_IMM's) last byte is placed last;
	 * rocev2 places every packet in PSN order. */
	struct {
		enum ibv_wr_opcode op;
		const char *name;
		int want;
	} ops[] = {
		{IBV_WR_RDMA_WRITE, "WRITE", 1},       {IBV_WR_RDMA_WRITE_WITH_IMM, "WRITE_IMM", 1},
		{IBV_WR_SEND, "SEND", roce},           {IBV_WR_SEND_WITH_IMM, "SEND_IMM", roce},
		{IBV_WR_RDMA_READ, "READ", roce},      {IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD", 0},
		{IBV_WR_LOCAL_INV, "LOCAL_INV", 0},
	};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		int r0 = ibv_query_qp_data_in_order(qp, ops[i].op, 0);
		int caps = ibv_query_qp_data_in_order(qp, ops[i].op, 1 /* RETURN_CAPS */);
		int other = ibv_query_qp_data_in_order(qp, ops[i].op, 2);
		CHECK(r0 == ops[i].want);
		CHECK(caps == ops[i].want); /* WHOLE_MSG (1) only, never ALIGNED_128_BYTES (2) */
		CHECK(other == 0);
		printf("case inorder: %s %s: flags 0 -> %d, RETURN_CAPS -> %#x, unknown flag -> %d\n",
		       t ? t : "metaroce", ops[i].name, r0, caps, other);
	}
	sync_peer(s->sock);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: wrex ops|refuse|cqex|inorder\n");
		return 2;
	}
	const char *c = argv[1];
	pair_send_ops = OPS;
	if (!strcmp(c, "cqex"))
		pair_cq_ex_flags = CQEX_FLAGS;
	struct side s = {0};
	pid_t child = pair_fork(&s);
	if (child == 0) {
		setup(&s, 1, 0xee, 14, 7, 7);
		if (!strcmp(c, "ops"))
			resp_ops(&s);
		else if (!strcmp(c, "refuse"))
			resp_refuse(&s);
		else if (!strcmp(c, "cqex"))
			resp_cqex(&s);
		else if (!strcmp(c, "inorder"))
			sync_peer(s.sock);
		pair_send_counts(&s);
		_exit(0);
	}
	setup(&s, 1, 0, 14, 7, 7);
	if (!strcmp(c, "ops"))
		req_ops(&s);
	else if (!strcmp(c, "refuse"))
		req_refuse(&s);
	else if (!strcmp(c, "cqex"))
		req_cqex(&s);
	else if (!strcmp(c, "inorder"))
		req_inorder(&s);
	else {
		fprintf(stderr, "unknown case %s\n", c);
		kill(child, SIGKILL);
		return 2;
	}
	pair_add_counts(&s);
	pair_reap(child);
	return pair_result();
}
