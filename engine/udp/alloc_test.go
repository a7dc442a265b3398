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
// allocation shows as 1000 or more. Two kinds of one-time cost are
// allowed, and nothing else:
//   - at most maxRare: on loopback a path timeout is rare, and the first
//     one in a run can push more entries onto the core's resend ring
//     (tail-probe NOPs, Conn.sendNop) than it held before, which grows it
//     once (seen in about one run in seven: 1 allocation);
//   - up to perSocket for each send socket opened during the run: a
//     source port's socket opens at its first packet (Backend.sender), 14
//     or 15 allocations in package net, and the backend's socket list and
//     map grow now and then. The acceptor's ACKs travel on the path of the first
//     block they carry, so in warm-up B may use only some of its paths'
//     ports; on a loaded host (CI, its other packages running beside) an
//     ACK later leaves by another, and 1 to 3 sockets opened in the
//     measured run, 16 to 32 allocations in all, failed this test.
func TestWriteLoopbackAllocatesNothing(t *testing.T) {
	const maxRare, perSocket = 2, 20
	run, p := writeLoopback(t)
	run(2000) // warm up: rings, pools and socket batches at working size
	sockets := func() int { return len(p.b[0].senders) + len(p.b[1].senders) }
	var before int
	allocs := testing.AllocsPerRun(1, func() {
		before = sockets() // AllocsPerRun calls twice: this is the measured call's
		run(1000)
	})
	opened := sockets() - before
	if limit := float64(maxRare + perSocket*opened); allocs > limit {
		t.Fatalf("%v allocations in 1000 messages of 64 KiB with %d send sockets opened, want 0 per message (at most %v: %d rare ring growths, %d per socket)",
			allocs, opened, limit, maxRare, perSocket)
	}
	if allocs > 0 {
		t.Logf("%v allocations in 1000 messages, %d send sockets opened (one-time growth)", allocs, opened)
	}
}
