// Package verbs is the vocabulary every transport core of this module
// implements: the packet interface a backend drives (Transport, RxMeta,
// TxMeta, Time), the verbs objects an application uses (protection
// domains, memory regions and their keys, work requests, completions and
// the completion queue) and the behaviour interfaces one level above a
// connection (Device, Session, QP) through which front ends (the CLI, the
// simulator, test fixtures) run either transport without naming it.
//
// The package is sans-I/O like the cores: standard library only, no
// goroutines, no clock, no system calls. Everything reachable from one
// Device belongs to that device's goroutine (an engine shard); nothing here
// is safe for concurrent use.
//
// Verbs semantics both cores implement (what a libibverbs-compatible
// library needs beyond the data path):
//   - register a region at the application's own address
//     (ProtectionDomain.RegisterMRAt; RegisterMR picks synthetic
//     addresses);
//   - destroy one queue pair without closing its session or flushing the
//     peer's other queue pairs (QP.Destroy);
//   - deregister a region with I/O in flight: revoke, so its work fails and
//     nothing is placed into it afterwards (MemoryRegion.Deregister).
//
// The names follow libibverbs where a libibverbs concept exists
// (ibv_pd, ibv_mr, ibv_sge, ibv_send_wr, ibv_wc, ibv_cq, ibv_qp), so that a
// verbs-compatible C library can map its calls one to one onto this API.
package verbs
