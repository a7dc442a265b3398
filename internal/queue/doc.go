// Package queue holds the two containers the transport cores (metaroce/,
// rocev2/) share: a growable FIFO ring and a min-heap of timers. It is pure
// Go on the standard library alone, like the cores themselves: no I/O, no
// goroutines, no clock. Nothing here is safe for concurrent use.
package queue
