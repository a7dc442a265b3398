/*
 * cq.c: completion queues and completion channels.
 *
 * The Go side pushes completions into a CQ's ring (mrv_cq_push, from the
 * thread that runs the transport's step: the engine goroutine, or a
 * program's thread that polls or posts while it sleeps); ibv_poll_cq
 * (ctx->ops.poll_cq) drains it without crossing into Go, except to run
 * the transport when it finds the ring empty (cqwait.c). A CQ armed by
 * ibv_req_notify_cq raises one event on its channel when a step has
 * pushed completions into it, once that step has pushed into every CQ
 * (mrv_cq_push with n 0): the channel's eventfd (semaphore mode)
 * counts events, so a blocking ibv_get_cq_event and poll() on
 * channel->fd both wake, and a FIFO says which CQ each event is for.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "mrv.h"

static int valid_ctx(struct ibv_context *c)
{
	return c && c->device == &mrv_device_get()->dev;
}

MRV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	if (!valid_ctx(c))
		return mrv_fail_ptr(EINVAL);
	struct mrv_channel *ch = calloc(1, sizeof *ch);
	if (!ch)
		return mrv_fail_ptr(ENOMEM);
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		int e = errno;
		free(ch);
		return mrv_fail_ptr(e);
	}
	ch->ch.context = c;
	ch->ch.refcnt = 0;
	pthread_mutex_init(&ch->mu, NULL);
	return &ch->ch;
}

MRV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	if (!channel)
		return EINVAL;
	struct mrv_channel *ch = mrv_container_of(channel, struct mrv_channel, ch);
	pthread_mutex_lock(&ch->mu);
	int busy = channel->refcnt != 0;
	pthread_mutex_unlock(&ch->mu);
	if (busy)
		return EBUSY; /* CQs still use it, as verbs says */
	close(channel->fd);
	pthread_mutex_destroy(&ch->mu);
	free(ch->fifo);
	free(ch);
	return 0;
}

/* raise queues one event for cq on its channel (cq->mu held). */
static void raise_event(struct mrv_cq *cq)
{
	struct mrv_channel *ch = mrv_container_of(cq->cq.channel, struct mrv_channel, ch);
	pthread_mutex_lock(&ch->mu);
	if (ch->count == ch->cap) {
		unsigned ncap = ch->cap ? 2 * ch->cap : 16;
		struct ibv_cq **f = malloc(ncap * sizeof *f);
		if (!f) {
			pthread_mutex_unlock(&ch->mu);
			return; /* the event is lost; the CQ stays readable by polling */
		}
		for (unsigned i = 0; i < ch->count; i++)
			f[i] = ch->fifo[(ch->head + i) % ch->cap];
		free(ch->fifo);
		ch->fifo = f;
		ch->cap = ncap;
		ch->head = 0;
	}
	ch->fifo[(ch->head + ch->count) % ch->cap] = &cq->cq;
	ch->count++;
	pthread_mutex_unlock(&ch->mu);
	uint64_t one = 1;
	ssize_t r = write(ch->ch.fd, &one, sizeof one);
	(void)r;
}

int mrv_cq_push(struct mrv_cq *cq, const struct mrg_wc *wc, int n)
{
	pthread_mutex_lock(&cq->mu);
	if (n == 0) {
		/* The Go side's step is done pushing: raise what is due. */
		if (cq->event_due) {
			cq->event_due = 0;
			raise_event(cq);
		}
		pthread_mutex_unlock(&cq->mu);
		return 0;
	}
	int k = 0;
	for (; k < n && cq->count < cq->size; k++) {
		struct ibv_wc *w = &cq->ring[(cq->head + cq->count) % cq->size];
		memset(w, 0, sizeof *w);
		w->wr_id = wc[k].wr_id;
		w->status = (enum ibv_wc_status)wc[k].status;
		w->opcode = (enum ibv_wc_opcode)wc[k].opcode;
		w->byte_len = wc[k].byte_len;
		w->qp_num = wc[k].qp_num;
		if (wc[k].with_imm) {
			w->imm_data = wc[k].imm;
			w->wc_flags = IBV_WC_WITH_IMM;
		}
		/* Atomic: ibv_poll_cq reads it without the lock to see an
		 * empty ring (release: the entry is written first). */
		__atomic_store_n(&cq->count, cq->count + 1, __ATOMIC_RELEASE);
	}
	if (k > 0 && cq->armed && cq->cq.channel) {
		/* Raised at the step's end (n == 0), after every CQ's push. */
		cq->armed = 0;
		cq->event_due = 1;
	}
	pthread_mutex_unlock(&cq->mu);
	if (k > 0)
		mrv_cq_pushed();
	return k;
}

int mrv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct mrv_cq *cq = mrv_container_of(ibcq, struct mrv_cq, cq);
	if (n < 0)
		return -1;
	if (__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE) == 0) {
		/* Empty: no lock taken (the engine pushing into the ring never
		 * waits for a spinning poller), and the wait of cqwait.c. */
		mrv_cq_idle(cq);
		return 0;
	}
	pthread_mutex_lock(&cq->mu);
	int k = 0;
	for (; k < n && cq->count > 0; k++) {
		wc[k] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		__atomic_store_n(&cq->count, cq->count - 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&cq->mu);
	if (k > 0)
		mrv_cq_busy();
	return k;
}

/* Solicited-only arming is treated as arming for every completion: a
 * superset of events, which verbs permits (a spurious wake-up polls
 * nothing). As ibv_req_notify_cq(3) says, the event is for the next
 * completion added: one already in the ring raises none (the program
 * polls after arming). perftest's -e loops rely on that: they arm before
 * they poll the completion their event was for, and count on one event
 * per completion (raising one at arming for what is in the ring made
 * ib_send_lat -e fail at once). */
int mrv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)solicited_only;
	struct mrv_cq *cq = mrv_container_of(ibcq, struct mrv_cq, cq);
	if (!ibcq->channel)
		return EINVAL;
	pthread_mutex_lock(&cq->mu);
	cq->armed = 1;
	pthread_mutex_unlock(&cq->mu);
	/* The program may wait for the event rather than poll: sends left to
	 * a driving poller go out now. */
	mrv_kick_left();
	return 0;
}

MRV_EXPORT struct ibv_cq *mrv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	if (!valid_ctx(c) || cqe < 1 || cqe > MRV_MAX_CQE || comp_vector < 0 || comp_vector >= c->num_comp_vectors)
		return mrv_fail_ptr(EINVAL);
	struct mrv_cq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return mrv_fail_ptr(ENOMEM);
	cq->size = (unsigned)cqe;
	cq->ring = calloc(cq->size, sizeof *cq->ring);
	if (!cq->ring) {
		free(cq);
		return mrv_fail_ptr(ENOMEM);
	}
	pthread_mutex_init(&cq->mu, NULL);
	cq->cq.context = c;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	uint32_t h = 0;
	int err = mrg.MetaroceVerbsCreateCQ(cq, cqe, &h);
	if (err) {
		free(cq->ring);
		free(cq);
		return mrv_fail_ptr(err);
	}
	cq->cq.handle = h;
	if (channel) {
		struct mrv_channel *ch = mrv_container_of(channel, struct mrv_channel, ch);
		pthread_mutex_lock(&ch->mu);
		channel->refcnt++;
		pthread_mutex_unlock(&ch->mu);
	}
	return &cq->cq;
}

MRV_EXPORT int mrv_destroy_cq(struct ibv_cq *ibcq)
{
	if (!ibcq)
		return EINVAL;
	struct mrv_cq *cq = mrv_container_of(ibcq, struct mrv_cq, cq);
	int err = mrg.MetaroceVerbsDestroyCQ(ibcq->handle);
	if (err)
		return err; /* EBUSY: a QP still uses it */
	if (ibcq->channel) {
		struct mrv_channel *ch = mrv_container_of(ibcq->channel, struct mrv_channel, ch);
		pthread_mutex_lock(&ch->mu);
		ibcq->channel->refcnt--;
		/* Drop events not yet taken for this CQ. */
		for (unsigned i = 0; i < ch->count; i++)
			if (ch->fifo[(ch->head + i) % ch->cap] == ibcq)
				ch->fifo[(ch->head + i) % ch->cap] = NULL;
		pthread_mutex_unlock(&ch->mu);
	}
	pthread_mutex_destroy(&cq->mu);
	free(cq->ring);
	free(cq);
	return 0;
}

MRV_EXPORT int mrv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	if (!channel || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	struct mrv_channel *ch = mrv_container_of(channel, struct mrv_channel, ch);
	mrv_kick_left(); /* nothing posted waits for a poll while this blocks */
	for (;;) {
		uint64_t v;
		if (read(channel->fd, &v, sizeof v) != sizeof v)
			return -1; /* errno from read: EAGAIN on a non-blocking fd */
		pthread_mutex_lock(&ch->mu);
		struct ibv_cq *got = NULL;
		if (ch->count > 0) {
			got = ch->fifo[ch->head];
			ch->head = (ch->head + 1) % ch->cap;
			ch->count--;
		}
		pthread_mutex_unlock(&ch->mu);
		if (got) {
			*cq = got;
			*cq_context = got->cq_context;
			return 0;
		}
		/* The event of a destroyed CQ: take the next one. */
	}
}

MRV_EXPORT void mrv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* Resizing would move completions under a polling thread; not offered
 * (IBV_DEVICE_RESIZE_MAX_WR is not claimed). */
MRV_EXPORT int mrv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq, (void)cqe;
	return EOPNOTSUPP;
}

MRV_DEFAULT_1_1(create_cq);
MRV_DEFAULT_1_1(destroy_cq);
MRV_DEFAULT_1_1(get_cq_event);
MRV_DEFAULT_1_1(ack_cq_events);
MRV_DEFAULT_1_1(resize_cq);
