/*
 * device.c: the device list. There is exactly one device, metaroce0: the
 * transport behind it is in this process, so listing it needs no kernel
 * device, no sysfs and no Go runtime (ibv_devices never starts one).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>

#include "mrv.h"

#undef ibv_get_device_list

static struct mrv_device the_device;
static int device_ready;

/* fnv1a64 hashes s: the node GUID is stable per host (from its name) and
 * marked locally administered, like a MAC-derived GUID of a soft device. */
static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

struct mrv_device *mrv_device_get(void)
{
	/* Built once; a data race here writes the same bytes twice. */
	if (__atomic_load_n(&device_ready, __ATOMIC_ACQUIRE))
		return &the_device;
	struct mrv_device *d = &the_device;
	char host[256] = "localhost";
	gethostname(host, sizeof host - 1);
	d->dev.node_type = IBV_NODE_CA;
	d->dev.transport_type = IBV_TRANSPORT_IB; /* RoCE HCAs report IB */
	strncpy(d->dev.name, MRV_DEVICE_NAME, sizeof d->dev.name - 1);
	strncpy(d->dev.dev_name, MRV_DEVICE_NAME, sizeof d->dev.dev_name - 1);
	/* No uverbs character device and no sysfs directory exist: the
	 * paths are left empty so nothing mistakes them for real ones. */
	d->guid = (fnv1a64(host) & 0x0000ffffffffffffull) | 0x0200000000000000ull;
	__atomic_store_n(&device_ready, 1, __ATOMIC_RELEASE);
	return d;
}

static struct mrv_device *to_mdev(struct ibv_device *dev)
{
	struct mrv_device *d = mrv_device_get();
	return dev == &d->dev ? d : NULL;
}

MRV_EXPORT struct ibv_device **mrv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(2, sizeof *list);
	if (!list) {
		if (num_devices)
			*num_devices = 0;
		return mrv_fail_ptr(ENOMEM);
	}
	list[0] = &mrv_device_get()->dev;
	if (num_devices)
		*num_devices = 1;
	return list;
}

MRV_EXPORT void mrv_free_device_list(struct ibv_device **list)
{
	free(list);
}

MRV_EXPORT const char *mrv_get_device_name(struct ibv_device *device)
{
	if (!to_mdev(device))
		return mrv_fail_ptr(EINVAL);
	return device->name;
}

MRV_EXPORT __be64 mrv_get_device_guid(struct ibv_device *device)
{
	struct mrv_device *d = to_mdev(device);
	if (!d) {
		errno = EINVAL;
		return 0;
	}
	return htobe64(d->guid);
}

/* The kernel index of the device: there is no kernel device (the
 * documented answer for kernels without it is -1). */
MRV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return -1;
}

MRV_DEFAULT_1_1(free_device_list);
MRV_DEFAULT_1_1(get_device_guid);
MRV_DEFAULT_1_1(get_device_list);
MRV_DEFAULT_1_1(get_device_name);
