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

/* The symbol names the C side resolves with dlsym. */
#define MRG_OPEN_SYM "MetaroceVerbsOpen"

/* MetaroceVerbsOpen(ep, err, errlen): load the profile (METAROCE_PROFILE,
 * METAROCE_* overrides) and fill ep. */
typedef int (*mrg_open_fn)(struct mrv_endpoint *ep, char *err, int errlen);

#endif
