/*
 * async.c: asynchronous events (ibv_get_async_event, ibv_ack_async_event,
 * ctx->async_fd).
 *
 * Each open context has a FIFO of events and an eventfd in semaphore mode
 * as its async_fd, one count per queued event: poll() on async_fd wakes
 * when an event is queued, and ibv_get_async_event reads one count first,
 * so it blocks unless the program made the fd non-blocking (fcntl
 * O_NONBLOCK, as rdma-core's async_fd), then fails with EAGAIN.
 *
 * The Go side raises events (mrv_async_push, on its engine goroutine) by
 * QPN: a QP is registered here from creation to destruction. What it
 * raises and when is libverbs/golib/async.go's; here, an event for a QP
 * the program itself put in the error state is dropped, and COMM_EST only
 * reaches a QP still in RTR.
 *
 * Lifetime, as rdma-core's: ibv_destroy_qp drops the QP's events not yet
 * taken and waits until every one ibv_get_async_event handed out is
 * acknowledged (events_completed == events_reported). A dropped event
 * stays in the FIFO, marked, until a read passes it (async_fd's count
 * still has it): the FIFO holds at most what was raised, which is at most
 * two events per QP the program created (COMM_EST and QP_FATAL, each
 * once: async.go) and one DEVICE_FATAL; nothing a peer sends adds more.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "mrv.h"

/* A context's events. */
struct mrv_async {
	pthread_mutex_t mu;
	struct ibv_async_event *fifo;
	int *dead; /* fifo[i]'s QP was destroyed before the event was taken */
	unsigned cap, head, count;
	struct mrv_context *ctx;
	struct mrv_async *next; /* the open contexts (reg_mu) */
};

/* The registry (reg_mu): the open contexts, for device-wide events, and the
 * live QPs by the low byte of their QPN (QPN = port << 8 | index + 1). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mrv_async *contexts;
static struct mrv_qp *qps[256];

int mrv_async_open(struct mrv_context *m)
{
	struct mrv_async *a = calloc(1, sizeof *a);
	if (!a)
		return ENOMEM;
	m->vctx.context.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (m->vctx.context.async_fd < 0) {
		int e = errno;
		free(a);
		return e;
	}
	pthread_mutex_init(&a->mu, NULL);
	a->ctx = m;
	m->async = a;
	pthread_mutex_lock(&reg_mu);
	a->next = contexts;
	contexts = a;
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

void mrv_async_close(struct mrv_context *m)
{
	struct mrv_async *a = m->async;
	if (!a)
		return;
	pthread_mutex_lock(&reg_mu);
	for (struct mrv_async **p = &contexts; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			break;
		}
	pthread_mutex_unlock(&reg_mu);
	close(m->vctx.context.async_fd);
	pthread_mutex_destroy(&a->mu);
	free(a->fifo);
	free(a->dead);
	free(a);
	m->async = NULL;
}

/* enqueue appends ev to a's FIFO and counts it on async_fd. */
static void enqueue(struct mrv_async *a, const struct ibv_async_event *ev)
{
	pthread_mutex_lock(&a->mu);
	if (a->count == a->cap) {
		unsigned ncap = a->cap ? 2 * a->cap : 16;
		struct ibv_async_event *f = malloc(ncap * sizeof *f);
		int *d = malloc(ncap * sizeof *d);
		if (!f || !d) {
			free(f);
			free(d);
			pthread_mutex_unlock(&a->mu);
			return; /* out of memory: the event is lost */
		}
		for (unsigned i = 0; i < a->count; i++) {
			f[i] = a->fifo[(a->head + i) % a->cap];
			d[i] = a->dead[(a->head + i) % a->cap];
		}
		free(a->fifo);
		free(a->dead);
		a->fifo = f;
		a->dead = d;
		a->cap = ncap;
		a->head = 0;
	}
	unsigned i = (a->head + a->count) % a->cap;
	a->fifo[i] = *ev;
	a->dead[i] = 0;
	a->count++;
	pthread_mutex_unlock(&a->mu);
	uint64_t one = 1;
	ssize_t r = write(a->ctx->vctx.context.async_fd, &one, sizeof one);
	(void)r;
}

/* is_qp_event says whether an event's element is a QP. */
static int is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return 1;
	default:
		return 0;
	}
}

/* mrv_async_push is mrg.h's mrg_async_fn. */
void mrv_async_push(uint32_t qpn, int event)
{
	struct ibv_async_event ev;
	memset(&ev, 0, sizeof ev);
	ev.event_type = (enum ibv_event_type)event;
	pthread_mutex_lock(&reg_mu);
	if (qpn == 0) {
		for (struct mrv_async *a = contexts; a; a = a->next)
			enqueue(a, &ev);
	} else if (is_qp_event(ev.event_type)) {
		struct mrv_qp *q = qps[qpn & 0xff];
		enum ibv_qp_state st = q ? q->qp.state : IBV_QPS_RESET;
		int keep = q && q->qp.qp_num == qpn && st != IBV_QPS_ERR &&
			   (ev.event_type != IBV_EVENT_COMM_EST || st == IBV_QPS_RTR);
		if (keep) {
			ev.element.qp = &q->qp;
			enqueue(to_mctx(q->qp.context)->async, &ev);
		}
	}
	pthread_mutex_unlock(&reg_mu);
}

void mrv_async_qp_add(struct mrv_qp *q)
{
	pthread_mutex_lock(&reg_mu);
	qps[q->qp.qp_num & 0xff] = q;
	pthread_mutex_unlock(&reg_mu);
}

void mrv_async_qp_gone(struct mrv_qp *q)
{
	pthread_mutex_lock(&reg_mu);
	if (qps[q->qp.qp_num & 0xff] == q)
		qps[q->qp.qp_num & 0xff] = NULL;
	pthread_mutex_unlock(&reg_mu);
	struct mrv_async *a = to_mctx(q->qp.context)->async;
	pthread_mutex_lock(&a->mu);
	for (unsigned i = 0; i < a->count; i++) {
		unsigned k = (a->head + i) % a->cap;
		if (is_qp_event(a->fifo[k].event_type) && a->fifo[k].element.qp == &q->qp)
			a->dead[k] = 1;
	}
	pthread_mutex_unlock(&a->mu);
	pthread_mutex_lock(&q->qp.mutex);
	while (q->qp.events_completed != q->events_reported)
		pthread_cond_wait(&q->qp.cond, &q->qp.mutex);
	pthread_mutex_unlock(&q->qp.mutex);
}

static int valid_ctx(struct ibv_context *c)
{
	return c && c->device == &mrv_device_get()->dev && to_mctx(c)->async;
}

MRV_EXPORT int mrv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	if (!valid_ctx(c) || !ev) {
		errno = EINVAL;
		return -1;
	}
	struct mrv_async *a = to_mctx(c)->async;
	for (;;) {
		uint64_t v;
		if (read(c->async_fd, &v, sizeof v) != sizeof v)
			return -1; /* errno from read: EAGAIN on a non-blocking fd */
		pthread_mutex_lock(&a->mu);
		int got = 0;
		if (a->count > 0) {
			unsigned k = a->head;
			a->head = (a->head + 1) % a->cap;
			a->count--;
			if (!a->dead[k]) {
				*ev = a->fifo[k];
				got = 1;
				if (is_qp_event(ev->event_type)) {
					/* Counted before a->mu is released, so that
					 * ibv_destroy_qp (which marks under a->mu)
					 * waits for its acknowledgement. */
					struct mrv_qp *q = mrv_container_of(ev->element.qp, struct mrv_qp, qp);
					pthread_mutex_lock(&ev->element.qp->mutex);
					q->events_reported++;
					pthread_mutex_unlock(&ev->element.qp->mutex);
				}
			}
		}
		pthread_mutex_unlock(&a->mu);
		if (got)
			return 0;
		/* The event of a destroyed QP: take the next one. */
	}
}

MRV_EXPORT void mrv_ack_async_event(struct ibv_async_event *ev)
{
	if (!ev)
		return;
	if (is_qp_event(ev->event_type) && ev->element.qp) {
		struct ibv_qp *qp = ev->element.qp;
		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
	}
	/* Device and port events count nothing; the library raises no CQ,
	 * SRQ or WQ event. */
}

MRV_DEFAULT_1_1(ack_async_event);
MRV_DEFAULT_1_1(get_async_event);
