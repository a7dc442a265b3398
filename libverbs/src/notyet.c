/*
 * notyet.c: calls of issue 14 that are not implemented yet. They fail
 * cleanly like the stubs in stubs.c, so a program gets an error it can
 * print, never a crash. Each call leaves this file when its implementation
 * lands.
 */
#include "mrv.h"

#define NOTYET EOPNOTSUPP

/* Asynchronous events: none is raised yet (ctx->async_fd never becomes
 * readable). */
MRV_EXPORT int mrv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	(void)c, (void)ev;
	errno = NOTYET;
	return -1;
}
MRV_EXPORT void mrv_ack_async_event(struct ibv_async_event *ev) { (void)ev; }

MRV_DEFAULT_1_1(ack_async_event);
MRV_DEFAULT_1_1(get_async_event);
