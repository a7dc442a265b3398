/*
 * context.c: opening the device and querying it: device attributes, the one
 * port, its GID table (one entry: the endpoint's IPv4-mapped address, RoCE
 * v2) and its P_Key table (the default P_Key).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>
#include <sys/eventfd.h>

#include "mrv.h"

#undef ibv_query_port

/* What rdma-core's driver.h calls enum ibv_gid_type_sysfs (not installed). */
enum mrv_gid_type_sysfs {
	MRV_GID_TYPE_SYSFS_IB_ROCE_V1,
	MRV_GID_TYPE_SYSFS_ROCE_V2,
};

/* The prefix of struct ibv_port_attr that IBVERBS_1.1's ibv_query_port may
 * write: the struct before port_cap_flags2 was appended (48 bytes). */
#define MRV_COMPAT_PORT_ATTR_LEN offsetof(struct ibv_port_attr, port_cap_flags2)

enum ibv_mtu mrv_mtu_enum(uint32_t mtu)
{
	if (mtu >= 4096)
		return IBV_MTU_4096;
	if (mtu >= 2048)
		return IBV_MTU_2048;
	if (mtu >= 1024)
		return IBV_MTU_1024;
	if (mtu >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

void mrv_gid(const struct mrv_endpoint *ep, union ibv_gid *gid)
{
	memset(gid, 0, sizeof *gid);
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &ep->ipv4, 4);
}

static int valid_ctx(struct ibv_context *c)
{
	return c && c->device == &mrv_device_get()->dev;
}

static void device_attr(struct mrv_context *m, struct ibv_device_attr *a)
{
	struct mrv_device *d = mrv_device_get();
	memset(a, 0, sizeof *a);
	snprintf(a->fw_ver, sizeof a->fw_ver, "metaroce/%s", m->ep.transport);
	a->node_guid = htobe64(d->guid);
	a->sys_image_guid = htobe64(d->guid);
	a->max_mr_size = 1ull << 47; /* the user address space */
	a->page_size_cap = 0x1000;
	a->vendor_id = MRV_VENDOR_ID;
	a->vendor_part_id = MRV_PART_ID;
	a->max_qp = MRV_MAX_QP;
	a->max_qp_wr = MRV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = MRV_MAX_SGE;
	a->max_sge_rd = MRV_MAX_SGE;
	a->max_cq = MRV_MAX_CQ;
	a->max_cqe = MRV_MAX_CQE;
	a->max_mr = MRV_MAX_MR;
	a->max_pd = MRV_MAX_PD;
	a->max_qp_rd_atom = MRV_MAX_RD_ATOM;
	a->max_res_rd_atom = MRV_MAX_RD_ATOM * MRV_MAX_QP;
	a->max_qp_init_rd_atom = MRV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
}

MRV_EXPORT int mrv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	if (!valid_ctx(c) || !a)
		return EINVAL;
	device_attr(to_mctx(c), a);
	return 0;
}

/* verbs_context.query_device_ex: attr_size is the caller's sizeof, which
 * an older program has smaller; only that much is written. */
static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;
	if (!valid_ctx(c) || !attr || attr_size < sizeof a.orig_attr)
		return EINVAL;
	if (in && in->comp_mask)
		return EINVAL;
	memset(&a, 0, sizeof a);
	device_attr(to_mctx(c), &a.orig_attr);
	memcpy(attr, &a, attr_size < sizeof a ? attr_size : sizeof a);
	return 0;
}

static void port_attr(struct mrv_context *m, struct ibv_port_attr *p)
{
	memset(p, 0, sizeof *p);
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = mrv_mtu_enum(m->ep.mtu);
	p->gid_tbl_len = 1;
	p->port_cap_flags = IBV_PORT_IP_BASED_GIDS;
	p->max_msg_sz = MRV_MAX_MSG_SZ;
	p->pkey_tbl_len = 1;
	p->max_vl_num = 1; /* VL0 only */
	/* Nominal 4x EDR (100 Gb/s): the transport has no fixed link rate;
	 * nothing in the library paces by it. */
	p->active_width = 2; /* 4X */
	p->active_speed = 32; /* EDR */
	p->phys_state = 5; /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
}

/* verbs_context.query_port, reached by the ibv_query_port macro of every
 * program built against a current header: len is the caller's sizeof. */
static int query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr p;
	if (!valid_ctx(c) || !attr)
		return EINVAL;
	if (port != MRV_PORT_NUM)
		return EINVAL;
	port_attr(to_mctx(c), &p);
	memcpy(attr, &p, len < sizeof p ? len : sizeof p);
	return 0;
}

/* ibv_query_port@IBVERBS_1.1: the exported symbol, called by programs
 * whose header had no verbs_context query_port; their struct ends before
 * port_cap_flags2, so only the compat prefix is written. */
MRV_EXPORT int mrv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return query_port(c, port, (struct ibv_port_attr *)attr, MRV_COMPAT_PORT_ATTR_LEN);
}

MRV_EXPORT int mrv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	if (!valid_ctx(c) || !gid || port != MRV_PORT_NUM || index != 0) {
		errno = EINVAL;
		return -1;
	}
	mrv_gid(&to_mctx(c)->ep, gid);
	return 0;
}

static void gid_entry(struct mrv_context *m, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof *e);
	mrv_gid(&m->ep, &e->gid);
	e->gid_index = 0;
	e->port_num = MRV_PORT_NUM;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
}

MRV_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
				 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	if (!valid_ctx(c) || !entry || flags || port != MRV_PORT_NUM || index != 0)
		return EINVAL;
	gid_entry(to_mctx(c), &e);
	memcpy(entry, &e, entry_size < sizeof e ? entry_size : sizeof e);
	return 0;
}

MRV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries,
					size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	if (!valid_ctx(c) || flags || entry_size < sizeof e)
		return -EINVAL;
	if (max_entries < 1 || !entries)
		return -EINVAL;
	gid_entry(to_mctx(c), &e);
	memcpy(entries, &e, sizeof e);
	return 1;
}

/* ibv_query_gid_type@IBVERBS_PRIVATE_34 (ibv_devinfo uses it). */
MRV_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
				  enum mrv_gid_type_sysfs *type);
MRV_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index,
				  enum mrv_gid_type_sysfs *type)
{
	if (!valid_ctx(c) || !type || port != MRV_PORT_NUM || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*type = MRV_GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

MRV_EXPORT int mrv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	if (!valid_ctx(c) || !pkey || port != MRV_PORT_NUM || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff); /* the default P_Key, full membership */
	return 0;
}

MRV_EXPORT int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	if (!valid_ctx(c) || port != MRV_PORT_NUM)
		return -EINVAL;
	if ((be16toh(pkey) & 0x7fff) != 0x7fff)
		return -ENOENT;
	return 0;
}

MRV_EXPORT struct ibv_context *mrv_open_device(struct ibv_device *dev)
{
	if (dev != &mrv_device_get()->dev)
		return mrv_fail_ptr(ENODEV);
	struct mrv_context *m = calloc(1, sizeof *m);
	if (!m)
		return mrv_fail_ptr(ENOMEM);
	int err = mrv_open_transport(&m->ep);
	if (err) {
		free(m);
		return mrv_fail_ptr(err);
	}
	struct ibv_context *c = &m->vctx.context;
	c->device = dev;
	c->cmd_fd = -1; /* no kernel device */
	/* Async events are delivered through async_fd (poll() and
	 * ibv_get_async_event: async.c). */
	if ((err = mrv_async_open(m))) {
		free(m);
		return mrv_fail_ptr(err);
	}
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.poll_cq = mrv_poll_cq;
	c->ops.req_notify_cq = mrv_req_notify_cq;
	c->ops.post_send = mrv_post_send;
	c->ops.post_recv = mrv_post_recv;
	c->ops.post_srq_recv = mrv_post_srq_recv;
	m->vctx.sz = sizeof m->vctx;
	m->vctx.query_port = query_port;
	m->vctx.query_device_ex = query_device_ex;
	m->vctx.create_qp_ex = mrv_create_qp_ex;
	m->vctx.create_cq_ex = mrv_create_cq_ex;
	return c;
}

MRV_EXPORT int mrv_close_device(struct ibv_context *c)
{
	if (!valid_ctx(c))
		return EINVAL;
	struct mrv_context *m = to_mctx(c);
	mrv_async_close(m);
	pthread_mutex_destroy(&c->mutex);
	free(m);
	return 0;
}

MRV_DEFAULT_1_1(close_device);
MRV_DEFAULT_1_1(open_device);
MRV_DEFAULT_1_1(query_device);
MRV_DEFAULT_1_1(query_gid);
MRV_DEFAULT_1_1(query_pkey);
MRV_DEFAULT_1_1(query_port);
