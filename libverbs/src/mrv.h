/*
 * mrv.h: the private side of metaroce's libibverbs.so.1.
 *
 * Every object the library hands out is a public <infiniband/verbs.h>
 * struct embedded FIRST in a private one, as rdma-core providers do: the
 * application reads and writes the public part (the data path's static
 * inlines read ctx->ops, verbs_context's negative offsets, qp_ex's wr_*
 * table), the library reaches its own state with container_of. Because the
 * public structs come from the installed header itself, their sizes and
 * offsets are rdma-core v44's by construction; test/abi_layout.c checks
 * them against the header's documented figures.
 *
 * Contract of every exported call: it never crashes on a call it does not
 * implement. Unimplemented calls fail the way their documented API fails:
 * an int-returning call returns an errno value (EOPNOTSUPP), a pointer-
 * returning one returns NULL with errno set.
 */
#ifndef MRV_H
#define MRV_H

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <infiniband/verbs.h>

#include "mrg.h"

#define MRV_EXPORT __attribute__((visibility("default")))

/*
 * MRV_SYMVER binds the local function impl to the versioned name
 * name@node: a compat (non-default) version of an exported symbol, as
 * rdma-core keeps for IBVERBS_1.0. The default version comes from the
 * version script (libibverbs.map).
 */
#define MRV_SYMVER(impl, name, node) \
	__asm__(".symver " #impl "," #name "@" #node)

/*
 * MRV_DEFAULT_1_1 exports mrv_NAME as ibv_NAME@@IBVERBS_1.1, the default
 * version of a call that also has an IBVERBS_1.0 compat version
 * (compat_1_0.c). Such a name is listed in both nodes of the version
 * script, so both versions are bound explicitly, as rdma-core does. The
 * assertion keeps mrv_NAME's type that of <infiniband/verbs.h>'s ibv_NAME.
 */
#define MRV_DEFAULT_1_1(name)                                                   \
	_Static_assert(__builtin_types_compatible_p(__typeof__(mrv_##name),     \
						    __typeof__(ibv_##name)),     \
		       "mrv_" #name " has the type of ibv_" #name);               \
	__asm__(".symver mrv_" #name ",ibv_" #name "@@IBVERBS_1.1")

#define mrv_container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/* The one device and its one port. */
#define MRV_DEVICE_NAME "metaroce0"
#define MRV_PORT_NUM 1

/*
 * Capabilities. They describe what the library and the transport behind it
 * really do (docs/verbs.md): RC only, one SGE per work request, no SRQ,
 * UD, atomics, memory windows or multicast. MRV_MAX_QP follows from the
 * QPN layout: QPN = UDP port << 8 | (index + 1), index 0..254 per process.
 */
#define MRV_MAX_QP 255
#define MRV_MAX_QP_WR 4096
#define MRV_MAX_SGE 1
#define MRV_MAX_CQ 256
#define MRV_MAX_CQE 65536
#define MRV_MAX_MR 4096
#define MRV_MAX_PD 256
#define MRV_MAX_RD_ATOM 16
#define MRV_MAX_INLINE 256
#define MRV_MAX_MSG_SZ 0x80000000u
#define MRV_VENDOR_ID 0x0000 /* no IEEE OUI: not hardware */
#define MRV_PART_ID 1

/* A device of the list ibv_get_device_list returns. */
struct mrv_device {
	struct ibv_device dev; /* public: must stay first */
	uint64_t guid;         /* host byte order */
};

struct mrv_async;

/* An open device. */
struct mrv_context {
	struct verbs_context vctx; /* public: the app holds &vctx.context */
	struct mrv_endpoint ep;
	struct mrv_async *async; /* its asynchronous events (async.c) */
};

/* A protection domain. */
struct mrv_pd {
	struct ibv_pd pd; /* public: must stay first */
};

/* A memory region: registered at the program's own address. */
struct mrv_mr {
	struct ibv_mr mr; /* public: must stay first */
};

/*
 * A completion queue: a ring of ibv_wc the Go side fills (mrv_cq_push,
 * on its engine goroutine) and ibv_poll_cq drains, under mu. Polling never
 * crosses into Go.
 */
struct mrv_cq {
	union {
		struct ibv_cq cq;     /* public: must stay first */
		struct ibv_cq_ex cqx; /* ibv_create_cq_ex's (cq_ex.c): its prefix is cq */
	};
	pthread_mutex_t mu;
	struct ibv_wc *ring;
	unsigned size, head, count;
	int armed; /* ibv_req_notify_cq was called since the last event */
	int event_due; /* armed and pushed into: raised when the push ends */
	/* ibv_start_poll .. ibv_end_poll (cq_ex.c): the completion the read_*
	 * calls read, taken off the ring; mu is held meanwhile. */
	struct ibv_wc cur;
};

/*
 * A completion channel: an eventfd in semaphore mode (one count per
 * event, so poll() on channel->fd and a blocking read both work) and the
 * FIFO of CQs whose events are not yet taken by ibv_get_cq_event.
 */
struct mrv_channel {
	struct ibv_comp_channel ch; /* public: must stay first */
	pthread_mutex_t mu;
	struct ibv_cq **fifo;
	unsigned cap, head, count;
};

/* A queue pair (RC only). The public part is a struct ibv_qp_ex, whose
 * first member is the struct ibv_qp (qp_base): ibv_qp_to_qp_ex hands out
 * qpx of a QP created with ibv_create_qp_ex and send_ops_flags (qp_ex.c). */
struct mrv_qp {
	union {
		struct ibv_qp qp;     /* public: must stay first */
		struct ibv_qp_ex qpx; /* its qp_base is qp */
	};
	pthread_mutex_t mu; /* serialises posts: the scratch arrays are shared;
			     * held from ibv_wr_start to wr_complete/wr_abort */
	int sq_sig_all;
	struct ibv_qp_cap cap;
	struct ibv_qp_attr attr; /* what modify_qp set, for query_qp */
	int attr_mask;
	/* Inline sends: the data is copied at post time into a slot of this
	 * region (registered in the QP's PD), so the program may reuse its
	 * buffer at once. slots = 2 x max_send_wr: a slot is reused only after
	 * max_send_wr later posts, by which time its send has completed. */
	uint8_t *bounce;
	uint32_t bounce_slots, bounce_lkey, bounce_mr;
	uint64_t bounce_seq;
	struct mrg_send_wr *sbuf;
	struct mrg_recv_wr *rbuf;
	int sbuf_cap, rbuf_cap;
	/* The ibv_wr_* batch (qp_ex.c): is_ex once created with send_ops_flags;
	 * wr_n work requests built in sbuf since ibv_wr_start, wr_err the
	 * first error (wr_complete returns it and posts nothing). */
	int is_ex, wr_open, wr_n, wr_err;
	/* Asynchronous events (async.c): delivered by ibv_get_async_event and
	 * not yet acknowledged; ibv_destroy_qp waits for them. Counted under
	 * qp.mutex, as rdma-core's events_completed. */
	uint32_t events_reported;
};

static inline struct mrv_context *to_mctx(struct ibv_context *c)
{
	return mrv_container_of(c, struct mrv_context, vctx.context);
}

/* mrv_device_get returns the library's one device (device.c). */
struct mrv_device *mrv_device_get(void);

/* mrv_mtu_enum maps a payload MTU in bytes to the largest IB MTU enum
 * not above it (256..4096). */
enum ibv_mtu mrv_mtu_enum(uint32_t mtu);

/* mrv_gid fills gid with the IPv4-mapped address of ep (::ffff:a.b.c.d). */
void mrv_gid(const struct mrv_endpoint *ep, union ibv_gid *gid);

/* The completion sink the Go side calls (cq.c). */
int mrv_cq_push(struct mrv_cq *cq, const struct mrg_wc *wc, int n);

/* A poll that found cq empty, one that found completions, and a push
 * into any CQ: how a polling thread waits (cqwait.c). */
void mrv_cq_idle(struct mrv_cq *cq);
void mrv_cq_busy(void);
void mrv_cq_pushed(void);
/* mrv_will_poll: this thread polled within the spin and will run the
 * transport at its next empty poll (a post may leave its work to it).
 * mrv_sends_left: a post left its work to a poll (mrg.h: *deferred);
 * mrv_kick_left gets such work moving before the
 * program may stop polling (it arms a CQ, waits for a channel event). */
int mrv_will_poll(void);
void mrv_sends_left(void);
void mrv_kick_left(void);

/* The ctx->ops entries (cq.c, qp.c). */
int mrv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int mrv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int mrv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int mrv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int mrv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* ibv_create_cq's body, which ibv_create_cq_ex shares (cq.c), and
 * verbs_context.create_cq_ex (cq_ex.c). */
struct ibv_cq *mrv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector);
struct ibv_cq_ex *mrv_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a);

/* ibv_create_qp's body, which ibv_create_qp_ex shares (qp.c). */
struct ibv_qp *mrv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a);

/* verbs_context.create_qp_ex, and the ibv_qp_ex table of a QP it
 * creates (qp_ex.c). */
struct ibv_qp *mrv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);

/* Asynchronous events (async.c): a context's queue and async_fd, opened
 * and closed with the context; a QP is registered while it exists so that
 * the Go side can name it by QPN; mrv_async_qp_gone drops its queued events
 * and waits until the delivered ones are acknowledged (ibv_destroy_qp). */
int mrv_async_open(struct mrv_context *m);
void mrv_async_close(struct mrv_context *m);
void mrv_async_qp_add(struct mrv_qp *q);
void mrv_async_qp_gone(struct mrv_qp *q);
void mrv_async_push(uint32_t qpn, int event);

/* mrv_open_transport starts the transport (transport.c): fills ep, or
 * returns an errno value after printing why on stderr. */
int mrv_open_transport(struct mrv_endpoint *ep);

/* mrv_refuse says once per process, on stderr, that a program asked for
 * what the library does not offer (what: "SRQ", ...), so that the
 * program's own "couldn't create" message has its reason beside it. The
 * flag is the caller's (one per reason); the call is not on a hot path
 * (refusals end the program). */
static inline void mrv_refuse(int *said, const char *what)
{
	if (__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr, "metaroce verbs: %s is not supported (docs/verbs.md)\n", what);
}

/* mrv_set_errno sets errno to e and returns NULL: the pointer-returning
 * calls' way of failing. */
static inline void *mrv_fail_ptr(int e)
{
	errno = e;
	return NULL;
}

#endif
