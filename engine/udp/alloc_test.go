package udp

import (
	"testing"
)

// Once warm, moving messages over the UDP backend allocates nothing per
// message: recvmmsg/sendmmsg bursts, the per-path send sockets, ECN and
// overflow control messages, and the metaroce core between them.
// BenchmarkWriteLoopback reports allocs/op for the same workload; this
// asserts it.
//
// One measured call of 1000 messages counts allocations exactly
// (AllocsPerRun divides by the runs in integers). A per-message
// allocation shows as 1000 or more. At most maxRare are allowed: on
// loopback a path timeout is rare, and the first one in a run can push
// more entries onto the core's resend ring (tail-probe NOPs, Conn.sendNop)
// than it held before, which grows it once (seen in about one run in
// seven: 1 allocation); that is amortised growth, not a cost per message.
func TestWriteLoopbackAllocatesNothing(t *testing.T) {
	const maxRare = 2
	run := writeLoopback(t)
	run(2000) // warm up: rings, pools and socket batches at working size
	allocs := testing.AllocsPerRun(1, func() { run(1000) })
	if allocs > maxRare {
		t.Fatalf("%v allocations in 1000 messages of 64 KiB, want 0 per message (at most %d rare ring growths)", allocs, maxRare)
	}
	if allocs > 0 {
		t.Logf("%v allocations in 1000 messages (a ring's one-time growth)", allocs)
	}
}
