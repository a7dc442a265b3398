package udp

import (
	"testing"
)

// Once warm, moving messages over the UDP backend allocates nothing:
// recvmmsg/sendmmsg bursts, the per-path send sockets, ECN and overflow
// control messages, and the metaroce core between them. BenchmarkWrite-
// Loopback reports allocs/op for the same workload; this asserts it.
func TestWriteLoopbackAllocatesNothing(t *testing.T) {
	run := writeLoopback(t)
	run(2000) // warm up: rings, pools and socket batches at working size
	// One measured call of many messages: AllocsPerRun divides by the
	// number of runs in integers, so several short runs would hide a few
	// allocations.
	allocs := testing.AllocsPerRun(1, func() { run(1000) })
	if allocs != 0 {
		t.Fatalf("%v allocations in 1000 messages of 64 KiB, want 0", allocs)
	}
}
