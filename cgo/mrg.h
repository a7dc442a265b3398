/*
 * mrg.h: the C ABI between libibverbs.so.1 (C) and libmetaroce-verbs.so,
 * the Go transport built with -buildmode=c-shared (libverbs/golib), which
 * the C side loads with dlopen at the first ibv_open_device. Plain C types
 * only: both sides include this file (the Go side from its cgo preamble).
 *
 * Contract: every MRG_* call returns 0 or an errno value; on failure it
 * writes a one-line reason (NUL-terminated, at most errlen bytes) to err.
 * Go never keeps a pointer the C side passed in beyond the call.
 */
#ifndef MRG_H
#define MRG_H

#include <stddef.h>
#include <stdint.h>

/*
 * The endpoint the device stands for, as the profile gives it: ipv4 in
 * network byte order, the UDP port (0 until the transport has a socket),
 * the payload MTU in bytes and the transport's name (metaroce, rocev2).
 */
struct mrv_endpoint {
	uint32_t ipv4;
	uint16_t udp_port;
	uint16_t reserved;
	uint32_t mtu;
	char transport[16];
};

/*
 * A send work request as the C side flattens it before the one crossing
 * per ibv_post_send call: one SGE (the library's limit), inline data
 * already copied to the QP's bounce region (addr and lkey point there).
 */
struct mrg_send_wr {
	uint64_t wr_id;
	uint64_t addr;
	uint64_t remote_addr;
	uint32_t length;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t imm;       /* as the program gave it (network order) */
	uint8_t opcode;     /* MRG_OP_* */
	uint8_t signaled;   /* IBV_SEND_SIGNALED or sq_sig_all */
	uint8_t reserved[6];
};

/* A receive work request. */
struct mrg_recv_wr {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

enum {
	MRG_OP_WRITE,
	MRG_OP_WRITE_IMM,
	MRG_OP_SEND,
	MRG_OP_SEND_IMM,
	MRG_OP_READ,
};

/*
 * A work completion as the Go side hands it to a CQ: status and opcode are
 * already the ibv_wc_status and ibv_wc_opcode values.
 */
struct mrg_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm;
	uint32_t qp_num;
	uint32_t with_imm;
};

/* The QP attributes modify_qp passes to RTR and RTS. */
struct mrg_qp_attr {
	uint32_t state;     /* enum ibv_qp_state */
	uint32_t peer_ipv4; /* RTR: from ah_attr.grh.dgid, network order */
	uint32_t dest_qpn;  /* RTR */
	uint8_t timeout;    /* RTS */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t min_rnr_timer; /* RTR */
	uint32_t rq_psn;       /* RTR: the peer's first PSN (0 when the mask omits it) */
	uint32_t sq_psn;       /* RTS: this QP's first PSN (its earlier value, or 0) */
};

struct mrv_cq;

/* The C side's completion sink, passed to MetaroceVerbsOpen (the C
 * library exports nothing beyond rdma-core's ABI, so the Go side gets it
 * as a pointer): copies n entries into cq's ring and raises its channel
 * event if the CQ was armed (cq.c). Returns how many fitted; called by
 * the thread that runs the transport's step (one at a time). The event is raised when the Go side calls it with
 * n == 0 (wc NULL), once a step has pushed into every CQ. */
typedef int (*mrg_push_fn)(struct mrv_cq *cq, const struct mrg_wc *wc, int n);

/* The C side's asynchronous-event sink, passed to MetaroceVerbsAsyncInit:
 * queues event (an enum ibv_event_type) for the QP numbered qpn, or for
 * every open device when qpn is 0 (async.c). Called on the engine
 * goroutine (or the goroutine that saw the engine stop); never calls back
 * into Go. */
typedef void (*mrg_async_fn)(uint32_t qpn, int event);

/* What MetaroceVerbsDataInOrder answers: the capability bits of rdma-core's
 * later IBV_QUERY_QP_DATA_IN_ORDER_* (v44's header predates them). */
enum {
	MRG_IN_ORDER_WHOLE_MSG = 1 << 0,
	MRG_IN_ORDER_ALIGNED_128_BYTES = 1 << 1,
};

/* What MetaroceVerbsProgress answers: it ran the transport on the caller's
 * thread, and that sent or received a packet (MOVED) or did not (RAN); the
 * loop is busy running it (BUSY: the loop steps aside for the caller at its
 * next iteration); or neither (no loop of that kind: the caller spins). */
enum {
	MRG_PROGRESS_NONE = 0,
	MRG_PROGRESS_RAN = 1,
	MRG_PROGRESS_BUSY = 2,
	MRG_PROGRESS_MOVED = 3,
};

/*
 * The calls of the Go side, resolved with dlsym by name (MRG_API lists
 * them: return type, name, arguments). Handles are non-zero uint32s;
 * every call returns 0 or an errno value (the transport starts at the
 * first call that needs it and prints why when it cannot).
 *
 * MetaroceVerbsPostSend queues as many of the n work requests as the send
 * queue has room for (*posted; ENOMEM if not all), ibv_post_send's rule;
 * MetaroceVerbsPostSendAll, one ibv_wr_complete batch, all or none.
 * Both write *deferred 1 when they left the work to a thread that polls:
 * the caller's own (lazy: it polled within the spin, cqwait.c) or the one
 * that drives the transport from its polls; it goes out at that thread's
 * next empty poll, and the C side calls MetaroceVerbsKick before the
 * program may stop polling.
 * MetaroceVerbsAsyncInit hands over the event sink (once, at load).
 * MetaroceVerbsDataInOrder writes MRG_IN_ORDER_* bits for opcode op
 * (MRG_OP_*) under the transport ibv_open_device read.
 */
#define MRG_API(X)                                                                          \
	X(int, MetaroceVerbsOpen, (struct mrv_endpoint * ep, mrg_push_fn push, char *err, int errlen))          \
	X(int, MetaroceVerbsAllocPD, (uint32_t * pd))                                              \
	X(int, MetaroceVerbsDeallocPD, (uint32_t pd))                                          \
	X(int, MetaroceVerbsRegMR, (uint32_t pd, void *addr, uint64_t len, uint64_t iova,      \
				    int access, uint32_t *handle, uint32_t *lkey, uint32_t *rkey)) \
	X(int, MetaroceVerbsDeregMR, (uint32_t mr))                                            \
	X(int, MetaroceVerbsCreateCQ, (struct mrv_cq * cq, int depth, uint32_t *handle))                    \
	X(int, MetaroceVerbsDestroyCQ, (uint32_t cq))                                          \
	X(int, MetaroceVerbsCreateQP, (uint32_t pd, uint32_t send_cq, uint32_t recv_cq,       \
				       int sq_depth, int rq_depth, uint32_t *handle, uint32_t *qpn)) \
	X(int, MetaroceVerbsModifyQP, (uint32_t qp, const struct mrg_qp_attr *attr, char *err, int errlen)) \
	X(int, MetaroceVerbsDestroyQP, (uint32_t qp))                                          \
	X(int, MetaroceVerbsPostSend, (uint32_t qp, const struct mrg_send_wr *wr, int n, int lazy, int *posted, int *deferred)) \
	X(int, MetaroceVerbsPostRecv, (uint32_t qp, const struct mrg_recv_wr *wr, int n, int *posted)) \
	X(int, MetaroceVerbsPostSendAll, (uint32_t qp, const struct mrg_send_wr *wr, int n, int lazy, int *deferred)) \
	X(int, MetaroceVerbsAsyncInit, (mrg_async_fn fn))                                              \
	X(int, MetaroceVerbsDataInOrder, (int op, uint32_t *caps))                                         \
	X(int, MetaroceVerbsProgress, (int64_t drive_ns))                                      \
	X(int, MetaroceVerbsKick, (void))

#define MRG_DECLARE(ret, name, args) typedef ret(*name##_fn) args;
MRG_API(MRG_DECLARE)
#undef MRG_DECLARE

/* The table the C side fills at load (transport.c). */
struct mrg_api {
#define MRG_FIELD(ret, name, args) name##_fn name;
	MRG_API(MRG_FIELD)
#undef MRG_FIELD
};

extern struct mrg_api mrg;

#endif
