/*
 * integrity.c: data integrity through the verbs API under whatever loss
 * the profile injects (the Go test sets METAROCE_UDP_LOSS to 0, 0.01 and
 * 0.05). Requester and responder are two processes (pair.h). For WRITE,
 * WRITE_WITH_IMM, READ, SEND and SEND_WITH_IMM at sizes from 1 byte to
 * 4 MiB, a batch of work requests with distinct patterns is posted at
 * once; every byte is checked where it lands, every completion must
 * arrive exactly once, successful, in posting order per QP (send side
 * and receive side), with the right byte_len and immediate, and no
 * completion may be left over at the end.
 *
 * Prints one "round OP SIZE xN ok|FAILED" line per batch, the arrivals
 * each side's impairment stage dropped (the Go test checks them against
 * the loss it set), and ends "N passed, M failed".
 */
#define PAIR_BUF (16u << 20)
#include "pair.h"
#include <arpa/inet.h>
#include <dlfcn.h>

enum { OP_WRITE, OP_WRITE_IMM, OP_READ, OP_SEND, OP_SEND_IMM, NOPS };
static const char *opname[NOPS] = {"write", "write_imm", "read", "send", "send_imm"};
static const uint32_t sizes[] = {1, 3, 64, 1000, 4096, 65537, 1u << 20, 4u << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* injected returns how many arrivals the transport's impairment stage
 * dropped in this process (udp.loss): the Go half's
 * MetaroceVerbsRxInjectedDrops, looked up in the copy the library already
 * loaded from $METAROCE_VERBS_GOLIB; -1 if it cannot be found. */
static long injected(void)
{
	const char *p = getenv("METAROCE_VERBS_GOLIB");
	void *h = p ? dlopen(p, RTLD_NOW | RTLD_NOLOAD) : NULL;
	uint64_t (*f)(void) = h ? (uint64_t(*)(void))dlsym(h, "MetaroceVerbsRxInjectedDrops") : NULL;
	return f ? (long)f() : -1;
}

/* pat is byte i of work request j's pattern in round seed. */
static uint8_t pat(uint32_t seed, uint32_t j, uint32_t i)
{
	uint32_t x = i * 2654435761u ^ (seed * 40503u + j * 977u);
	return (uint8_t)(x >> 13 ^ x);
}
static void fill(uint8_t *b, uint32_t len, uint32_t seed, uint32_t j)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = pat(seed, j, i);
}
static int same(const uint8_t *b, uint32_t len, uint32_t seed, uint32_t j)
{
	for (uint32_t i = 0; i < len; i++)
		if (b[i] != pat(seed, j, i))
			return 0;
	return 1;
}

struct round {
	uint32_t op, size, n, seed;
};

static uint32_t imm_of(uint32_t seed, uint32_t j) { return htonl(seed * 1000u + j); }

/* reap waits for n completions and checks they are successful and come in
 * wr_id order base, base+1, ...; it returns how many were right. */
static int reap(struct side *s, int n, uint64_t base, enum ibv_wc_opcode want, struct round *r)
{
	int good = 0;
	for (int k = 0; k < n; k++) {
		struct ibv_wc wc = {0};
		if (!wait_wc(s, &wc, 20000)) {
			fprintf(stderr, "%s: %s %u: completion %d of %d never came\n", role, opname[r->op], r->size, k, n);
			break;
		}
		int ok = wc.status == IBV_WC_SUCCESS && wc.wr_id == base + (uint64_t)k && wc.opcode == want;
		if (ok && (want == IBV_WC_RECV || want == IBV_WC_RECV_RDMA_WITH_IMM)) {
			ok = wc.byte_len == r->size;
			int imm = r->op == OP_WRITE_IMM || r->op == OP_SEND_IMM;
			ok = ok && !!(wc.wc_flags & IBV_WC_WITH_IMM) == imm &&
			     (!imm || wc.imm_data == imm_of(r->seed, (uint32_t)k));
		}
		if (!ok)
			fprintf(stderr, "%s: %s %u: completion %d: wr_id %lu status %s opcode %d byte_len %u\n", role,
				opname[r->op], r->size, k, (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status),
				wc.opcode, wc.byte_len);
		good += ok;
	}
	return good;
}

static void requester(struct side *s)
{
	uint32_t seed = 1;
	for (uint32_t op = 0; op < NOPS; op++)
		for (size_t z = 0; z < NSIZES; z++, seed++) {
			struct round r = {.op = op, .size = sizes[z], .n = sizes[z] >= (1u << 20) ? 2 : 4, .seed = seed};
			put(s->sock, &r, sizeof r);
			char c;
			get(s->sock, &c, 1); /* the responder is ready (receives posted, READ source filled) */
			uint32_t stride = 4u << 20;
			for (uint32_t j = 0; j < r.n; j++) {
				uint8_t *b = s->buf + j * stride;
				if (op == OP_READ)
					memset(b, 0, r.size);
				else
					fill(b, r.size, seed, j);
			}
			struct ibv_send_wr wr[4], *bad;
			struct ibv_sge sge[4];
			static const enum ibv_wr_opcode ops[NOPS] = {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
								     IBV_WR_RDMA_READ, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM};
			for (uint32_t j = 0; j < r.n; j++) {
				sge[j] = (struct ibv_sge){.addr = (uintptr_t)(s->buf + j * stride), .length = r.size,
							  .lkey = s->mr->lkey};
				wr[j] = (struct ibv_send_wr){.wr_id = (uint64_t)seed << 8 | j, .sg_list = &sge[j], .num_sge = 1,
							     .opcode = ops[op], .send_flags = IBV_SEND_SIGNALED,
							     .imm_data = imm_of(seed, j), .next = j + 1 < r.n ? &wr[j + 1] : NULL};
				wr[j].wr.rdma.remote_addr = s->peer.addr + j * stride;
				wr[j].wr.rdma.rkey = s->peer.rkey;
			}
			CHECK(ibv_post_send(s->qp[0], wr, &bad) == 0);
			static const enum ibv_wc_opcode wcs[NOPS] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
								     IBV_WC_RDMA_READ, IBV_WC_SEND, IBV_WC_SEND};
			int good = reap(s, (int)r.n, (uint64_t)seed << 8, wcs[op], &r);
			CHECK(good == (int)r.n);
			int bytes = 1;
			if (op == OP_READ)
				for (uint32_t j = 0; j < r.n; j++)
					bytes &= same(s->buf + j * stride, r.size, seed, j);
			CHECK(bytes);
			c = 'd';
			put(s->sock, &c, 1);
			int verdict;
			get(s->sock, &verdict, sizeof verdict); /* the responder's checks of this round */
			printf("round %s %u x%u %s\n", opname[op], r.size, r.n,
			       good == (int)r.n && bytes && verdict ? "ok" : "FAILED");
		}
	struct round end = {.op = NOPS};
	put(s->sock, &end, sizeof end);
	struct ibv_wc wc;
	CHECK(!wait_wc(s, &wc, 100)); /* nothing left over */
}

static void responder(struct side *s)
{
	for (;;) {
		struct round r;
		get(s->sock, &r, sizeof r);
		if (r.op >= NOPS)
			break;
		uint32_t stride = 4u << 20;
		for (uint32_t j = 0; j < r.n; j++) {
			uint8_t *b = s->buf + j * stride;
			if (r.op == OP_READ)
				fill(b, r.size, r.seed, j);
			else
				memset(b, 0, r.size < stride ? r.size + 1 : stride);
			if (r.op == OP_SEND || r.op == OP_SEND_IMM || r.op == OP_WRITE_IMM) {
				/* A SEND's receive takes the whole slot; a WRITE_IMM's none. */
				uint32_t len = r.op == OP_WRITE_IMM ? 0 : stride;
				CHECK(post_recv(s->qp[0], (uint64_t)r.seed << 8 | j, b, len, s->mr->lkey) == 0);
			}
		}
		char c = 'r';
		put(s->sock, &c, 1);
		int good = (int)r.n;
		if (r.op == OP_SEND || r.op == OP_SEND_IMM || r.op == OP_WRITE_IMM)
			good = reap(s, (int)r.n, (uint64_t)r.seed << 8,
				    r.op == OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, &r);
		get(s->sock, &c, 1); /* the requester saw its completions */
		int bytes = 1;
		if (r.op != OP_READ)
			for (uint32_t j = 0; j < r.n; j++)
				bytes &= same(s->buf + j * stride, r.size, r.seed, j) &&
					 (r.size == stride || s->buf[j * stride + r.size] == 0); /* nothing past the end */
		CHECK(good == (int)r.n);
		CHECK(bytes);
		int verdict = good == (int)r.n && bytes;
		put(s->sock, &verdict, sizeof verdict);
	}
	struct ibv_wc wc;
	CHECK(!wait_wc(s, &wc, 100));
}

int main(void)
{
	struct side s = {0};
	pid_t child = pair_fork(&s);
	if (child == 0) {
		setup(&s, 1, 0, 14, 7, 7);
		responder(&s);
		long drops = injected();
		CHECK(drops >= 0);
		pair_send_counts(&s);
		put(s.sock, &drops, sizeof drops);
		_exit(0);
	}
	double t0 = now_ms();
	setup(&s, 1, 0, 14, 7, 7);
	requester(&s);
	pair_add_counts(&s);
	long drops[2] = {injected(), 0};
	get(s.sock, &drops[1], sizeof drops[1]);
	CHECK(drops[0] >= 0);
	printf("injected drops: requester %ld, responder %ld\n", drops[0], drops[1]);
	pair_reap(child);
	printf("%.0f ms\n", now_ms() - t0);
	return pair_result();
}
