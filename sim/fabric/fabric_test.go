package fabric

import (
	"github.com/metaroce/metaroce/verbs"
	"testing"

	"github.com/stretchr/testify/require"
)

const twoLeaves = `
duration: 2ms
topology: {leaves: 2, hosts_per_leaf: 1, spines: 4}
`

// uplinkCounts returns how many packets leaf 0 of plane 0 sent to each
// spine.
func uplinkCounts(s *Fabric) []uint64 {
	var c []uint64
	for _, li := range s.topo.sws[0].up {
		c = append(c, s.links[li].txPackets)
	}
	return c
}

// Many source ports from host 0 to host 1 spread roughly evenly over the
// four spines, and every packet arrives.
func TestFabricECMPSpreadsPathsOverSpines(t *testing.T) {
	const n = 2000
	s, w := probeSim(t, twoLeaves, map[int][]probeSend{0: spaced(n, 500, 1, 1000, 1, 0, 1000)})
	require.Len(t, w[1].got, n)
	for i, c := range uplinkCounts(s) {
		require.InDelta(t, n/4, float64(c), 0.15*n/4, "spine %d carried %d of %d", i, c, n)
	}
}

// One 5-tuple always takes the same spine.
func TestFabricSameTupleSameSpine(t *testing.T) {
	for _, port := range []uint16{49152, 49153, 50000, 61000} {
		s, w := probeSim(t, twoLeaves, map[int][]probeSend{0: spaced(100, 500, 1, port, 0, 0, 1000)})
		require.Len(t, w[1].got, 100)
		used := 0
		for _, c := range uplinkCounts(s) {
			if c > 0 {
				require.EqualValues(t, 100, c)
				used++
			}
		}
		require.Equal(t, 1, used, "port %d", port)
	}
}

// A queue above the step threshold marks CE: two senders at line rate
// into one receiver build a queue at the receiver's leaf port; packets
// that found more than K queued arrive marked, the first ones do not.
func TestFabricQueueAboveThresholdMarksCE(t *testing.T) {
	yaml := `
duration: 1ms
topology: {leaves: 1, hosts_per_leaf: 3, spines: 1, buffer: 10MiB, ecn: {mode: step, k: 20KiB}}
`
	// Each sender offers 100 packets of 4000 B back to back (faster than
	// its port drains, so its NIC queue paces them at line rate).
	script := map[int][]probeSend{
		1: spaced(100, 1, 0, 100, 1, 0, 4000),
		2: spaced(100, 1, 0, 200, 1, 0, 4000),
	}
	s, w := probeSim(t, yaml, script)
	got := w[0].got
	require.Len(t, got, 200)
	marked := 0
	for i, r := range got {
		if r.ce {
			marked++
		}
		if i < 5 {
			require.False(t, r.ce, "packet %d arrived before any queue built up, yet marked", i)
		}
	}
	// The queue grows by one packet every two arrivals, so roughly the
	// packets after the first 2·K/size are marked.
	require.Greater(t, marked, 150)
	require.Less(t, marked, 195)
	down := s.topo.sws[0].down[0]
	require.EqualValues(t, marked, s.links[down].ceMarks)
	require.Greater(t, s.links[down].peakQueue, int64(20<<10))
}

// RED marks nothing below Kmin, everything above Kmax, and about
// Pmax·(q−Kmin)/(Kmax−Kmin) in between.
func TestRedMarking(t *testing.T) {
	c := ECNConfig{Mode: "red", Kmin: 10000, Kmax: 50000, Pmax: 0.5}
	require.NoError(t, c.Validate())
	m := newMarker(&c, 1, 2)
	for i := 0; i < 1000; i++ {
		require.False(t, m.mark(9999))
		require.True(t, m.mark(50000))
	}
	n := 0
	const trials = 20000
	for i := 0; i < trials; i++ {
		if m.mark(30000) {
			n++
		}
	}
	require.InDelta(t, 0.25, float64(n)/trials, 0.02)
	step := ECNConfig{Mode: "step", K: 100}
	sm := newMarker(&step, 1, 2)
	require.False(t, sm.mark(100))
	require.True(t, sm.mark(101))
}

// A full buffer drops (tail drop): the receiver port's buffer holds a few
// packets, the burst overflows it, and what arrives plus what was dropped
// is what was sent.
func TestFabricFullBufferDrops(t *testing.T) {
	yaml := `
duration: 1ms
topology: {leaves: 1, hosts_per_leaf: 3, spines: 1, buffer: 20KiB}
`
	script := map[int][]probeSend{
		1: spaced(100, 1, 0, 100, 1, 0, 4000),
		2: spaced(100, 1, 0, 200, 1, 0, 4000),
	}
	s, w := probeSim(t, yaml, script)
	down := &s.links[s.topo.sws[0].down[0]]
	require.Greater(t, down.bufferDrops, uint64(50))
	require.EqualValues(t, 200, uint64(len(w[0].got))+down.bufferDrops)
	require.LessOrEqual(t, down.peakQueue, int64(20<<10))
}

// The buffer limit itself: a link accepts while the queue plus the packet
// fit, refuses the packet that does not, and accepts again once drained.
func TestLinkTailDrop(t *testing.T) {
	l := link{psPerByte: 80, buffer: 10000}
	for i := 0; i < 2; i++ {
		_, _, ok := l.enqueue(0, 4000, true)
		require.True(t, ok)
	}
	_, _, ok := l.enqueue(0, 4000, true)
	require.False(t, ok, "12000 bytes do not fit 10000")
	require.EqualValues(t, 1, l.bufferDrops)
	_, _, ok = l.enqueue(0, 2000, true)
	require.True(t, ok, "10000 bytes fit exactly")
	// After 8000 bytes' time (at 80 ps/B) 2000 bytes are left.
	require.EqualValues(t, 2000, l.queued(8000*80))
	_, _, ok = l.enqueue(8000*80, 4000, true)
	require.True(t, ok)
}

// A failed link drops whatever is routed over it: with one leaf-spine
// cable down from the start (and routing never reconverging), exactly the
// source ports that hash onto that spine are lost, every other one
// arrives.
func TestFabricFailedLinkDrops(t *testing.T) {
	const n = 800
	script := map[int][]probeSend{0: spaced(n, 500, 1, 1000, 1, 0, 1000)}
	healthy, _ := probeSim(t, twoLeaves, script)
	counts := uplinkCounts(healthy)
	failed, w := probeSim(t, twoLeaves+"failures: [{link: \"p0:leaf0-spine1\", at: 0}]\n", script)
	lost := failed.links[failed.topo.sws[0].up[1]].downDrops
	require.Equal(t, counts[1], lost, "every packet hashed onto spine 1 is dropped")
	require.EqualValues(t, n-counts[1], len(w[1].got))
	for _, r := range w[1].got {
		k := flowKey{src: HostIP(0, 0), dst: HostIP(1, 0), sport: r.entropy, dport: 4794}
		require.NotEqual(t, 1, ecmpPick(ecmpHash(failed.topo.sws[0].salt, k), 4), "port %d arrived over the failed spine", r.entropy)
	}
}

// With a reconvergence delay, routing stops using the failed spine once
// the delay has passed: only packets sent before then are lost.
func TestFabricReconvergence(t *testing.T) {
	const n = 800
	script := map[int][]probeSend{0: spaced(n, 500, 1, 1000, 1, 0, 1000)}
	yaml := `
duration: 2ms
topology: {leaves: 2, hosts_per_leaf: 1, spines: 4, reconvergence: 100us}
failures: [{link: "p0:leaf0-spine1", at: 0}]
`
	_, w := probeSim(t, yaml, script)
	got := w[1].got
	lost := n - len(got)
	// Spine 1 carries about a quarter of the ports; it is used for the
	// first 100 µs of 400 µs of sending: about 50 packets lost.
	require.Greater(t, lost, 20)
	require.Less(t, lost, 80)
	// Every packet sent after reconvergence (the last 500, sent from
	// 150 µs on) arrived.
	for k := 0; k < 500; k++ {
		require.EqualValues(t, 1000+n-500+k, got[len(got)-500+k].entropy, "a packet sent after reconvergence is missing")
	}
}

// A whole plane fails: everything sent on it is lost, the other plane is
// untouched; after recovery the plane carries traffic again.
func TestFabricPlaneFailure(t *testing.T) {
	yaml := `
duration: 1ms
topology: {kind: multi-plane, planes: 2, leaves: 2, hosts_per_leaf: 1, spines: 2}
failures: [{plane: 1, at: 100us, recover: 300us}]
`
	var sends []probeSend
	for i := 0; i < 400; i++ {
		sends = append(sends, probeSend{at: verbs.Time(i) * 1000, dst: 1, entropy: uint16(i), plane: uint8(i % 2), n: 1000})
	}
	_, w := probeSim(t, yaml, map[int][]probeSend{0: sends})
	byPlane := [2]int{}
	for _, r := range w[1].got {
		byPlane[r.plane]++
	}
	require.Equal(t, 200, byPlane[0])
	// Plane 1 lost what was sent (or in flight) between 100 and 300 µs:
	// about 100 packets.
	require.InDelta(t, 100, byPlane[1], 5)
}

// Random loss on the leaf→host links drops about the configured share.
func TestFabricRandomLoss(t *testing.T) {
	const n = 4000
	script := map[int][]probeSend{0: spaced(n, 200, 1, 1000, 1, 0, 500)}
	_, w := probeSim(t, twoLeaves+"loss: {rate: 0.1, where: host-down}\n", script)
	require.InDelta(t, 0.9*n, len(w[1].got), 0.02*n)
	// Bursty loss: mean burst 1/0.25 = 4 packets, long-run rate 0.02/(0.02+0.25).
	_, w = probeSim(t, twoLeaves+"loss: {where: host-down, bursty: {p_good_bad: 0.02, p_bad_good: 0.25, loss_bad: 1}}\n", script)
	rate := 0.02 / 0.27
	require.InDelta(t, (1-rate)*n, len(w[1].got), 0.03*n)
}

// Back to back: two hosts, one cable per plane, no switch.
func TestFabricBackToBack(t *testing.T) {
	yaml := `
duration: 1ms
topology: {kind: back-to-back, planes: 2, link_delay: 2us}
`
	s, w := probeSim(t, yaml, map[int][]probeSend{0: {{at: 0, dst: 1, entropy: 7, plane: 1, n: 1000}}})
	require.Len(t, w[1].got, 1)
	r := w[1].got[0]
	require.EqualValues(t, 1, r.plane)
	// 1066 B at 100 Gb/s (85.28 ns, rounded up) + 2 µs.
	require.EqualValues(t, 2086, r.at)
	require.Equal(t, 1, s.topo.maxHops)
}

// Loss on one named link: everything crossing it is lost, nothing else;
// an unknown name is an error that shows what names look like.
func TestFabricPerLinkLoss(t *testing.T) {
	script := map[int][]probeSend{0: spaced(100, 500, 1, 1000, 1, 0, 500), 1: spaced(100, 500, 0, 1000, 1, 0, 500)}
	s, w := probeSim(t, twoLeaves+"loss: {links: {\"p0:host1-leaf1\": 1}}\n", script)
	require.Empty(t, w[1].got, "host 1's link loses everything, both ways")
	require.Empty(t, w[0].got)
	require.EqualValues(t, 200, s.Stats().LossDrops)

	_, _, _, err := buildProbe(twoLeaves+"loss: {links: {\"p0:host9-leaf1\": 1}}\n", nil)
	require.ErrorContains(t, err, `no link named "p0:host9-leaf1"`)
	require.ErrorContains(t, err, "e.g.")
}
