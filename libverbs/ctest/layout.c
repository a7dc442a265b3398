/*
 * layout.c: the objects metaroce's libibverbs.so.1 hands out have rdma-core
 * v44's layout. Programs reach most of the data path through static
 * inlines compiled into them (ctx->ops, verbs_context at negative offsets,
 * ibv_qp_ex and ibv_cq_ex tables), so a layout drift would not fail to
 * link: it would crash or silently misbehave. Three kinds of check:
 *   - the installed <infiniband/verbs.h> is v44's ABI (sizes and offsets
 *     that rdma-core keeps append-only);
 *   - the library's private objects (mrv.h) embed the public struct first;
 *   - at run time, an opened context has its tables where the header's
 *     inlines look (abi_compat, sz, the verbs_context ops, query_port).
 * Prints "N passed, M failed" and exits non-zero on any failure.
 */
#include <stdio.h>
#include <string.h>
#include <stddef.h>

#include "../src/mrv.h"

static int passed, failed;

#define CHECK(cond)                                                   \
	do {                                                          \
		if (cond)                                             \
			passed++;                                     \
		else {                                                \
			failed++;                                     \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                     \
		}                                                     \
	} while (0)
#define SIZE(type, n) CHECK(sizeof(struct type) == (n))
#define OFF(type, member, n) CHECK(offsetof(struct type, member) == (n))
/* A verbs_context member's offset from the ibv_context the program holds. */
#define VOFF(member) \
	((long)offsetof(struct verbs_context, member) - (long)offsetof(struct verbs_context, context))

static void header_abi(void)
{
	SIZE(ibv_device, 664);
	OFF(ibv_device, name, 24);
	OFF(ibv_device, ibdev_path, 408);
	SIZE(ibv_context, 328);
	OFF(ibv_context, device, 0);
	OFF(ibv_context, ops, 8);
	OFF(ibv_context, cmd_fd, 264);
	OFF(ibv_context, async_fd, 268);
	OFF(ibv_context, num_comp_vectors, 272);
	OFF(ibv_context, abi_compat, 320);
	/* ctx->ops (at 8): the calls that never reach an exported symbol. */
	OFF(ibv_context_ops, poll_cq, 88);
	OFF(ibv_context_ops, req_notify_cq, 96);
	OFF(ibv_context_ops, post_srq_recv, 160);
	OFF(ibv_context_ops, post_send, 200);
	OFF(ibv_context_ops, post_recv, 208);
	SIZE(ibv_context_ops, 256);
	/* verbs_context grows down from the ibv_context. */
	CHECK(VOFF(sz) == -8);
	CHECK(VOFF(create_qp_ex) == -56);
	CHECK(VOFF(query_device_ex) == -104);
	CHECK(VOFF(create_cq_ex) == -120);
	CHECK(VOFF(query_port) == -(long)offsetof(struct verbs_context, context));
	CHECK(offsetof(struct verbs_context, context) == 320);
	SIZE(ibv_pd, 16);
	OFF(ibv_pd, handle, 8);
	SIZE(ibv_mr, 48);
	OFF(ibv_mr, addr, 16);
	OFF(ibv_mr, length, 24);
	OFF(ibv_mr, lkey, 36);
	OFF(ibv_mr, rkey, 40);
	SIZE(ibv_cq, 128);
	OFF(ibv_cq, channel, 8);
	OFF(ibv_cq, cq_context, 16);
	OFF(ibv_cq, cqe, 28);
	OFF(ibv_cq, comp_events_completed, 120);
	SIZE(ibv_qp, 160);
	OFF(ibv_qp, qp_context, 8);
	OFF(ibv_qp, send_cq, 24);
	OFF(ibv_qp, recv_cq, 32);
	OFF(ibv_qp, handle, 48);
	OFF(ibv_qp, qp_num, 52);
	OFF(ibv_qp, state, 56);
	OFF(ibv_qp, qp_type, 60);
	SIZE(ibv_comp_channel, 16);
	OFF(ibv_comp_channel, fd, 8);
	SIZE(ibv_wc, 48);
	OFF(ibv_wc, status, 8);
	OFF(ibv_wc, opcode, 12);
	OFF(ibv_wc, byte_len, 20);
	OFF(ibv_wc, imm_data, 24);
	OFF(ibv_wc, qp_num, 28);
	OFF(ibv_wc, wc_flags, 36);
	SIZE(ibv_send_wr, 128);
	OFF(ibv_send_wr, sg_list, 16);
	OFF(ibv_send_wr, num_sge, 24);
	OFF(ibv_send_wr, opcode, 28);
	OFF(ibv_send_wr, send_flags, 32);
	OFF(ibv_send_wr, imm_data, 36);
	OFF(ibv_send_wr, wr.rdma.remote_addr, 40);
	OFF(ibv_send_wr, wr.rdma.rkey, 48);
	SIZE(ibv_recv_wr, 32);
	OFF(ibv_recv_wr, sg_list, 16);
	OFF(ibv_recv_wr, num_sge, 24);
	SIZE(ibv_sge, 16);
	OFF(ibv_sge, length, 8);
	OFF(ibv_sge, lkey, 12);
	SIZE(ibv_qp_ex, 352);
	OFF(ibv_qp_ex, qp_base, 0);
	OFF(ibv_qp_ex, wr_id, 168);
	OFF(ibv_qp_ex, wr_flags, 176);
	OFF(ibv_qp_ex, wr_rdma_write, 224);
	OFF(ibv_qp_ex, wr_start, 320);
	OFF(ibv_qp_ex, wr_complete, 328);
	SIZE(ibv_cq_ex, 288);
	OFF(ibv_cq_ex, start_poll, 144);
	OFF(ibv_cq_ex, next_poll, 152);
	OFF(ibv_cq_ex, end_poll, 160);
	OFF(ibv_cq_ex, read_opcode, 168);
	SIZE(ibv_port_attr, 52);
	OFF(ibv_port_attr, gid_tbl_len, 12);
	OFF(ibv_port_attr, link_layer, 46);
	OFF(ibv_port_attr, port_cap_flags2, 48);
	SIZE(ibv_device_attr, 232);
	SIZE(ibv_gid_entry, 32);
}

static void private_layout(void)
{
	/* Public part first: the pointer the program holds is the object. */
	CHECK(offsetof(struct mrv_device, dev) == 0);
	CHECK(offsetof(struct mrv_context, vctx) == 0);
	CHECK(offsetof(struct mrv_context, vctx.context) == offsetof(struct verbs_context, context));
	/* The extended objects share their public prefix with the plain ones. */
	CHECK(offsetof(struct mrv_qp, qp) == 0 && offsetof(struct mrv_qp, qpx.qp_base) == 0);
	CHECK(offsetof(struct mrv_cq, cq) == 0 && offsetof(struct mrv_cq, cqx) == 0);
	CHECK(offsetof(struct ibv_cq_ex, comp_mask) == sizeof(struct ibv_cq));
}

static void runtime_objects(void)
{
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1);
	if (!list || n < 1)
		return;
	CHECK(strcmp(ibv_get_device_name(list[0]), "metaroce0") == 0);
	struct ibv_context *c = ibv_open_device(list[0]);
	CHECK(c != NULL);
	if (!c) {
		ibv_free_device_list(list);
		return;
	}
	struct verbs_context *v = verbs_get_ctx(c);
	CHECK(c->abi_compat == __VERBS_ABI_IS_EXTENDED);
	CHECK(v != NULL && (char *)v == (char *)c - offsetof(struct verbs_context, context));
	CHECK(v && v->sz >= sizeof(struct verbs_context));
	CHECK(verbs_get_ctx_op(c, query_port) != NULL);
	CHECK(verbs_get_ctx_op(c, query_device_ex) != NULL);
	CHECK(verbs_get_ctx_op(c, create_qp_ex) != NULL);
	CHECK(verbs_get_ctx_op(c, create_cq_ex) != NULL);
	CHECK(c->device == list[0]);
	/* The macro path (verbs_context.query_port, full struct) and the
	 * exported compat path (48-byte prefix only) agree. */
	struct ibv_port_attr full, compat;
	memset(&full, 0xaa, sizeof full);
	memset(&compat, 0xaa, sizeof compat);
	CHECK(ibv_query_port(c, 1, &full) == 0);
	CHECK(full.link_layer == IBV_LINK_LAYER_ETHERNET && full.gid_tbl_len == 1);
	CHECK(full.port_cap_flags2 == 0);
#undef ibv_query_port
	CHECK(ibv_query_port(c, 1, (struct _compat_ibv_port_attr *)&compat) == 0);
	CHECK(memcmp(&full, &compat, offsetof(struct ibv_port_attr, port_cap_flags2)) == 0);
	CHECK(compat.port_cap_flags2 == 0xaaaa); /* beyond the prefix: untouched */
	struct ibv_device_attr_ex ax;
	CHECK(ibv_query_device_ex(c, NULL, &ax) == 0 && ax.orig_attr.phys_port_cnt == 1);
	struct ibv_gid_entry ge;
	CHECK(ibv_query_gid_ex(c, 1, 0, &ge, 0) == 0 && ge.gid_type == IBV_GID_TYPE_ROCE_V2);
	CHECK(ge.gid.raw[10] == 0xff && ge.gid.raw[11] == 0xff);
	CHECK(ibv_close_device(c) == 0);
	ibv_free_device_list(list);
}

int main(void)
{
	header_abi();
	private_layout();
	runtime_objects();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
