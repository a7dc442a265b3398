// Package engine is the contract every data-path backend of this module
// keeps (engine/udp over kernel sockets, engine/dpdkengine over DPDK
// ports, engine/mempair over the deterministic in-memory link), so that
// an application (the CLI's perf and bench, a test) is written once
// against Backend and runs over any of them.
//
// The model is a poll-mode main loop, as DPDK's l2fwd has: one goroutine
// owns the transport core and, once per loop iteration, lets the
// application do its part (App.Step: post work requests, poll completion
// queues, decide whether it is finished), then runs the transport's due
// timers, sends what it has ready and receives one burst. Nothing is
// handed between goroutines per iteration, so the application's work and
// the packet I/O never wait for each other.
//
// The package is small on purpose and has no cgo: it names types, it
// does no I/O.
package engine
