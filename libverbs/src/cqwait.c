/*
 * cqwait.c: what a thread that polls an empty CQ does while it waits.
 *
 * A real HCA moves data without the CPU, so verbs programs spin on
 * ibv_poll_cq. Here the transport runs on the host's cores too (the Go
 * engine thread), and a spinning poller takes the CPU the engine needs to
 * produce the completion it waits for: on a host with as many busy
 * threads as cores the engine then runs only when the scheduler preempts
 * the spinner (ib_write_bw at 4 KiB: a third of the native rate). So for
 * MRV_SPIN_NS after its last completion or the last packet the transport
 * moved, a thread whose poll finds its CQ empty runs the transport itself
 * (MetaroceVerbsProgress: receive, timers, send, push, and it watches the
 * socket in the loop's place for the drive, MRV_DRIVE_NS; a loop found
 * busy steps aside for it at its next iteration; no thread is woken on the
 * way, as in the native path, whose application runs in the loop),
 * and yields the core (to the loop, or to the peer process that has to
 * answer, when the host has fewer free cores than busy threads); when the
 * loop is busy (it runs the transport, MRG_PROGRESS_BUSY), and after the
 * spin, it sleeps on a futex
 * until the Go side pushes a completion into any CQ (mrv_cq_pushed), at
 * most MRV_NAP_NS per poll: ibv_poll_cq stays a non-blocking call in
 * effect (it returns 0 within the nap), and a program that polls several
 * CQs in turn sees each push at once.
 *
 * METAROCE_VERBS_SPIN_US overrides the spin phase (0: nap at the first
 * empty poll; -1: never nap and never run the transport, spin as on an
 * HCA).
 *
 * Why 1 ms: a nap that a push ends costs two thread wake-ups (the loop's
 * for the packet, the poller's for the push) where the native path's
 * loop has one, and on a virtual machine a wake-up of an idle vCPU costs
 * tens of microseconds: with 100 us a ping-pong whose round trip came
 * near the spin napped and took 1.4 to 2 times the native median. 1 ms is
 * the loop's own idle wait; after it the thread naps, so an idle program
 * costs a core for at most 1 ms after its last completion.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "mrv.h"

#define MRV_SPIN_NS 1000000 /* empty polls spin (and drive) this long after the transport last moved, then nap */
#define MRV_NAP_NS 200000 /* one nap's bound */
#define MRV_BUSY_NS 100000 /* the transport busy this long (another thread drives it): nap rather than spin */
#define MRV_DRIVE_NS 100000 /* a drive's bound: the loop takes the transport back this soon after the poller stops */

static uint32_t push_gen;     /* futex word: bumped by every push */
static int push_waiters;      /* threads napping on push_gen */
static __thread uint64_t idle_since; /* this thread's first empty poll, 0: none */
static __thread uint64_t busy_since; /* its first poll since that found the loop busy */
static int64_t spin_ns = -2;  /* -2: not read yet */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t spin_limit(void)
{
	int64_t s = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
	if (s != -2)
		return s;
	const char *e = getenv("METAROCE_VERBS_SPIN_US");
	s = MRV_SPIN_NS;
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end == 0 && v >= -1)
			s = v < 0 ? -1 : v * 1000;
	}
	__atomic_store_n(&spin_ns, s, __ATOMIC_RELAXED);
	return s;
}

static __thread uint64_t last_poll; /* this thread's last ibv_poll_cq, 0: none */

void mrv_cq_busy(void)
{
	idle_since = busy_since = 0;
	if (spin_limit() > 0)
		last_poll = mono_ns();
}

/*
 * A thread that polls its CQ will poll again soon: a program posts a burst
 * of work requests between polls (perftest's ib_write_bw: 100 between two
 * completions at -t 128) or one between two polls (a ping-pong), and its
 * next poll that finds nothing runs the transport (mrv_cq_idle), taking
 * the whole burst in one step whose send pass batches the packets. So the
 * posts of a thread that polled within the spin leave their work to that
 * poll (MetaroceVerbsPostSend's lazy) instead of each running a step and
 * a send system call of its own. What could leave it waiting: a thread
 * that posts and then stops polling. Our calls that may block kick it out
 * first (mrv_kick_left: a nap, ibv_req_notify_cq, ibv_get_cq_event); a
 * thread that leaves the library altogether (computes, waits on a socket)
 * leaves it to the loop's next iteration: at the next packet, timer or
 * idle wait (1 ms) at the latest.
 */
int mrv_will_poll(void)
{
	int64_t spin = spin_limit();
	return spin > 0 && last_poll && mono_ns() - last_poll < (uint64_t)spin;
}

/* Set by a post whose work the Go side left to a poll; the next empty
 * poll's MetaroceVerbsProgress takes it, and so does mrv_kick_left. */
static int sends_left;

void mrv_sends_left(void) { __atomic_store_n(&sends_left, 1, __ATOMIC_RELAXED); }

void mrv_kick_left(void)
{
	if (__atomic_load_n(&sends_left, __ATOMIC_RELAXED) && __atomic_exchange_n(&sends_left, 0, __ATOMIC_ACQ_REL))
		mrg.MetaroceVerbsKick();
}

void mrv_cq_idle(struct mrv_cq *cq)
{
	int64_t spin = spin_limit();
	if (spin < 0)
		return;
	uint64_t now = mono_ns();
	if (spin > 0)
		last_poll = now;
	if (!idle_since)
		idle_since = now;
	if (now - idle_since < (uint64_t)spin) {
		/* Run the transport here (claiming it from a busy loop, which
		 * steps aside at its next iteration) and watch the socket for
		 * the drive, and yield: the peer process that answers may share
		 * this core. */
		__atomic_store_n(&sends_left, 0, __ATOMIC_RELAXED); /* this step takes them */
		int64_t drive = (int64_t)spin - (int64_t)(now - idle_since);
		if (drive > MRV_DRIVE_NS)
			drive = MRV_DRIVE_NS;
		int ran = mrg.MetaroceVerbsProgress(drive);
		if (ran == MRG_PROGRESS_MOVED)
			/* The transport is in use (a stream's ACKs, the packets
			 * this step sent): the spin starts again, so that a
			 * stream whose completions come further apart than the
			 * spin keeps its one driving thread. From the end of
			 * the step: a step that sent a burst may take longer
			 * than the spin on a loaded core. */
			idle_since = mono_ns();
		if (ran != MRG_PROGRESS_BUSY) {
			/* It ran, or there is no loop this thread can run
			 * (DPDK: NONE) and it spins. */
			busy_since = 0;
			sched_yield();
			return;
		}
		/* The loop is running the transport: it finishes its iteration
		 * and steps aside for this thread's claim. Should it not (a
		 * second polling thread drives), nap rather than spin beside
		 * it on a core that the driver and the peer process need. */
		if (!busy_since)
			busy_since = now;
		if (now - busy_since < MRV_BUSY_NS) {
			sched_yield();
			return;
		}
	} else
		mrv_kick_left(); /* this thread stops driving: what it left goes out */
	/* The generation first, then the ring: a push after this load
	 * changes push_gen and the futex does not sleep. */
	uint32_t gen = __atomic_load_n(&push_gen, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&push_waiters, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&cq->count, __ATOMIC_SEQ_CST) == 0) {
		struct timespec ts = {0, MRV_NAP_NS};
		syscall(SYS_futex, &push_gen, FUTEX_WAIT_PRIVATE, gen, &ts, NULL, 0);
	}
	__atomic_sub_fetch(&push_waiters, 1, __ATOMIC_SEQ_CST);
}

void mrv_cq_pushed(void)
{
	__atomic_add_fetch(&push_gen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&push_waiters, __ATOMIC_SEQ_CST) > 0)
		syscall(SYS_futex, &push_gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
