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
// The names follow libibverbs where a libibverbs concept exists
// (ibv_pd, ibv_mr, ibv_sge, ibv_send_wr, ibv_wc, ibv_cq, ibv_qp), so that a
// verbs-compatible C library can map its calls one to one onto this API.
package verbs
