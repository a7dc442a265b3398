// Package libverbs holds metaroce's libibverbs.so.1: a C library that is
// rdma-core v44's libibverbs ABI (src/, built by `make verbs` into
// build/verbs/), and the Go transport behind it (golib/, a c-shared
// library the C side loads with dlopen at the first ibv_open_device). With
// LD_LIBRARY_PATH=build/verbs, unmodified verbs programs (Debian's
// ibverbs-utils and perftest) use metaroce instead of an RDMA device.
// docs/verbs.md says what is supported.
//
// This Go package has no code of its own; test/verbslib checks the built
// library against Debian's (the exported symbol versions, the object
// layouts, the unmodified programs).
package libverbs
