package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The packet path allocates nothing once warm: building, sealing,
// decoding, checking and placing a data packet, the ACKs, completions,
// and with DCQCN the CNPs, cuts and pacing. The benchmarks of
// bench_test.go report allocs/op for the same workloads; this asserts
// them, so a regression fails make test rather than waiting for someone
// to read a benchmark.
func TestPacketPathAllocatesNothing(t *testing.T) {
	for _, w := range []struct {
		name  string
		setup func(testing.TB) func(int)
	}{{"write", writePath}, {"dcqcn", dcqcnPath}} {
		t.Run(w.name, func(t *testing.T) {
			run := w.setup(t)
			run(20000) // warm up: rings and pools reach their working size
			// One measured call of many packets: AllocsPerRun divides by
			// the number of runs in integers, so several short runs would
			// hide a few allocations.
			allocs := testing.AllocsPerRun(1, func() { run(10000) })
			require.Zero(t, allocs, "allocations in 10000 data packets")
		})
	}
	t.Run("icrc", func(t *testing.T) {
		pkt, f := icrcPacket()
		require.Zero(t, testing.AllocsPerRun(100, func() { SealICRC(pkt, len(pkt)-ICRCLen, f) }))
	})
	t.Run("decode", func(t *testing.T) {
		pkts := capturedPackets(t)
		require.NotEmpty(t, pkts)
		var p Packet
		i := 0
		allocs := testing.AllocsPerRun(100, func() {
			for range pkts {
				_ = p.Decode(pkts[i%len(pkts)])
				i++
			}
		})
		require.Zero(t, allocs, "allocations decoding %d packets", len(pkts))
	})
}
