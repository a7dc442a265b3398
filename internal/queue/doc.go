// Package queue holds the containers the transport cores (metaroce/,
// rocev2/) share: a growable FIFO ring, a min-heap of timers, and the
// Scheduler built from them that decides which of an endpoint's
// connections runs next. It is pure Go on the standard library alone, like
// the cores themselves: no I/O, no goroutines, no clock. Nothing here is
// safe for concurrent use.
package queue
