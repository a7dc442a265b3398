/*
 * fork.c: ibv_open_device and fork. A child forked after the parent opened
 * the device (the Go runtime is running) is refused with a message; a child
 * forked before any open, and a fork+exec'ed process, open it normally.
 * Prints "N passed, M failed".
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (cond)                                                                  \
			passed++;                                                          \
		else {                                                                     \
			failed++;                                                          \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
		}                                                                          \
	} while (0)

/* child_open forks a child that opens the device and exits 0 if it could,
 * 1 if it could not; it returns the child's status. */
static int child_open(struct ibv_device *dev)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct ibv_context *c = ibv_open_device(dev);
		_exit(c ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(int argc, char **argv)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	if (!list || !list[0])
		return 1;
	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		/* Run by execv below: a fresh process opens the device. */
		struct ibv_context *c = ibv_open_device(list[0]);
		return c && ibv_close_device(c) == 0 ? 0 : 1;
	}
	CHECK(child_open(list[0]) == 0); /* no runtime yet in the parent */
	struct ibv_context *c = ibv_open_device(list[0]);
	CHECK(c != NULL);
	CHECK(child_open(list[0]) == 1); /* refused, with a message */
	pid_t pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
		_exit(127);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* fork+exec is fine */
	CHECK(c && ibv_close_device(c) == 0);
	ibv_free_device_list(list);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
