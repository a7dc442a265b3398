/*
 * transport.c: loading the Go transport (libmetaroce-verbs.so) on demand.
 *
 * The Go half is not linked: it is dlopen'ed at the first ibv_open_device,
 * so a program that only lists devices (ibv_devices) never starts a Go
 * runtime (6 threads, a few MB). It is looked for beside this library, or
 * where METAROCE_VERBS_GOLIB says.
 *
 * Fork: the Go runtime does not survive fork without exec (its threads are
 * gone in the child; golang/go#15538). A child forked after the runtime
 * started is refused ibv_open_device with a message; fork+exec starts a
 * fresh process and is fine, and so is a child of a process that never
 * opened the device (it loads its own runtime).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mrv.h"

#define GOLIB_NAME "libmetaroce-verbs.so"

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static void *golib;            /* the dlopen handle, once loaded */
struct mrg_api mrg;            /* the Go side's calls, once loaded */
static volatile int forked_after_load;

static void on_fork_child(void) { forked_after_load = 1; }

/* golib_path writes where the Go half is: $METAROCE_VERBS_GOLIB, else the
 * directory this library was loaded from. */
static int golib_path(char *buf, size_t len)
{
	const char *env = getenv("METAROCE_VERBS_GOLIB");
	if (env && *env)
		return snprintf(buf, len, "%s", env) < (int)len ? 0 : ENAMETOOLONG;
	Dl_info info;
	if (!dladdr((void *)golib_path, &info) || !info.dli_fname)
		return ENOENT;
	const char *slash = strrchr(info.dli_fname, '/');
	int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
	const char *dir = slash ? info.dli_fname : ".";
	return snprintf(buf, len, "%.*s/%s", dirlen, dir, GOLIB_NAME) < (int)len ? 0 : ENAMETOOLONG;
}

/* load_golib loads the Go half once per process (load_mu held). */
static int load_golib(void)
{
	if (golib)
		return 0;
	char path[PATH_MAX];
	int err = golib_path(path, sizeof path);
	if (err) {
		fprintf(stderr, "metaroce verbs: cannot locate %s (set METAROCE_VERBS_GOLIB)\n", GOLIB_NAME);
		return err;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "metaroce verbs: loading the transport: %s\n", dlerror());
		return ENOENT;
	}
	struct mrg_api api;
#define MRG_RESOLVE(ret, name, args)                                                        \
	api.name = (name##_fn)dlsym(h, #name);                                              \
	if (!api.name) {                                                                    \
		fprintf(stderr, "metaroce verbs: %s lacks %s (build it with make verbs)\n", \
			path, #name);                                                       \
		dlclose(h);                                                                 \
		return ENOENT;                                                              \
	}
	MRG_API(MRG_RESOLVE)
#undef MRG_RESOLVE
	mrg = api;
	mrg.MetaroceVerbsAsyncInit(mrv_async_push);
	pthread_atfork(NULL, NULL, on_fork_child);
	golib = h;
	return 0;
}

int mrv_open_transport(struct mrv_endpoint *ep)
{
	char msg[512];
	int err;
	pthread_mutex_lock(&load_mu);
	if (forked_after_load) {
		pthread_mutex_unlock(&load_mu);
		fprintf(stderr, "metaroce verbs: ibv_open_device in a child forked after the transport "
				"started: the Go runtime does not survive fork without exec; exec the "
				"child (fork+exec works), or open the device only after forking\n");
		return EOPNOTSUPP;
	}
	err = load_golib();
	pthread_mutex_unlock(&load_mu);
	if (err)
		return err;
	memset(ep, 0, sizeof *ep);
	msg[0] = 0;
	err = mrg.MetaroceVerbsOpen(ep, mrv_cq_push, msg, sizeof msg);
	if (err)
		fprintf(stderr, "%s\n", msg[0] ? msg : "metaroce verbs: opening the transport failed");
	return err;
}
