package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Many source ports between one pair of hosts spread roughly evenly over k
// next hops, and the same 5-tuple always takes the same one.
func TestECMPSpreadsBySourcePort(t *testing.T) {
	for _, k := range []int{2, 4, 8, 16} {
		const ports = 4096
		counts := make([]int, k)
		salt := uint64(0xabcdef)
		for p := 0; p < ports; p++ {
			key := flowKey{src: 0x0a000001, dst: 0x0a000102, sport: uint16(49152 + p), dport: 4794}
			i := ecmpPick(ecmpHash(salt, key), k)
			counts[i]++
			for rep := 0; rep < 3; rep++ {
				require.Equal(t, i, ecmpPick(ecmpHash(salt, key), k), "same 5-tuple, different next hop")
			}
		}
		mean := float64(ports) / float64(k)
		for i, c := range counts {
			require.InDelta(t, mean, float64(c), 0.2*mean, "k=%d next hop %d got %d of %d", k, i, c, ports)
		}
	}
}

// Two switches with different salts make independent choices.
func TestECMPSaltsDecorrelate(t *testing.T) {
	same := 0
	const n = 2000
	for p := 0; p < n; p++ {
		key := flowKey{src: 1, dst: 2, sport: uint16(p), dport: 4794}
		if ecmpPick(ecmpHash(11, key), 4) == ecmpPick(ecmpHash(12, key), 4) {
			same++
		}
	}
	require.InDelta(t, n/4, same, n/10)
}
