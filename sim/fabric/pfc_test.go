package fabric

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

type pfcRecord struct {
	at    verbs.Time
	ev    pfcEvent
	link  int32
	bytes int64
}

// runPFCProbe runs the probe transport with lossless mode on and returns
// every lossless-mode event in order.
func runPFCProbe(t *testing.T, yaml string, script map[int][]probeSend) (*Fabric, []*probeHost, []pfcRecord) {
	t.Helper()
	var log []pfcRecord
	s, w := probeSimWith(t, yaml, script, func(s *Fabric) {
		require.True(t, s.pfc.on)
		s.pfc.trace = func(at verbs.Time, ev pfcEvent, link int32, bytes int64) {
			log = append(log, pfcRecord{at, ev, link, bytes})
		}
	})
	return s, w, log
}

// checkPFCTrace checks the pause protocol on every link of a run: a PAUSE
// is sent when the ingress count reaches xoff and reaches the sender one
// propagation delay later; a RESUME is sent at or below xon and reaches
// the sender one propagation delay later; a paused sender starts nothing
// until it is resumed. It returns the links that were paused.
func checkPFCTrace(t *testing.T, s *Fabric, log []pfcRecord) map[int32]bool {
	t.Helper()
	type linkState struct {
		sentAt   []verbs.Time // PAUSE/RESUME sent, not yet arrived, in order
		sentOn   []bool
		paused   bool
		pausedAt verbs.Time
	}
	st := map[int32]*linkState{}
	get := func(li int32) *linkState {
		if st[li] == nil {
			st[li] = &linkState{}
		}
		return st[li]
	}
	paused := map[int32]bool{}
	for _, r := range log {
		ls := get(r.link)
		delay := verbs.Time(s.links[r.link].delayPs / 1000)
		switch r.ev {
		case pfcXoff:
			require.GreaterOrEqual(t, r.bytes, s.pfc.xoff, "PAUSE sent below xoff on %s", s.links[r.link].name)
			ls.sentAt, ls.sentOn = append(ls.sentAt, r.at), append(ls.sentOn, true)
		case pfcXon:
			require.LessOrEqual(t, r.bytes, s.pfc.xon, "RESUME sent above xon on %s", s.links[r.link].name)
			ls.sentAt, ls.sentOn = append(ls.sentAt, r.at), append(ls.sentOn, false)
		case pfcPaused, pfcResumed:
			on := r.ev == pfcPaused
			require.NotEmpty(t, ls.sentAt, "%s: pause state changed with no frame sent", s.links[r.link].name)
			require.Equal(t, on, ls.sentOn[0])
			require.Equal(t, ls.sentAt[0]+delay, r.at, "%s: the frame must take exactly one propagation delay", s.links[r.link].name)
			ls.sentAt, ls.sentOn = ls.sentAt[1:], ls.sentOn[1:]
			ls.paused = on
			if on {
				ls.pausedAt = r.at
				paused[r.link] = true
			}
		case pfcTx:
			require.False(t, ls.paused, "%s started a packet at %d while paused (since %d)", s.links[r.link].name, r.at, ls.pausedAt)
		}
	}
	return paused
}

// Two senders at line rate into one receiver on one leaf: the leaf's
// ingress counts for both senders reach xoff, the leaf pauses their NIC
// ports within one propagation delay and resumes them below xon; a paused
// port sends nothing; nothing is dropped although the same burst overflows
// the same (20 KiB) buffer without PFC (TestFabricFullBufferDrops).
func TestPFCPausesHostPorts(t *testing.T) {
	yaml := `
duration: 1ms
topology: {leaves: 1, hosts_per_leaf: 3, spines: 1, buffer: 20KiB, pfc: {enabled: true, xoff: 20KiB, xon: 10KiB}}
`
	script := map[int][]probeSend{
		1: spaced(100, 1, 0, 100, 1, 0, 4000),
		2: spaced(100, 1, 0, 200, 1, 0, 4000),
	}
	s, w, log := runPFCProbe(t, yaml, script)
	require.Len(t, w[0].got, 200, "lossless: every packet arrives")
	f, ps := s.Stats(), pfcStats(t, s)
	require.Zero(t, f.BufferDrops)
	require.Zero(t, ps.OverflowDrops)
	paused := checkPFCTrace(t, s, log)
	require.True(t, paused[s.topo.hostPorts[1][0]], "host 1's port was paused")
	require.True(t, paused[s.topo.hostPorts[2][0]], "host 2's port was paused")
	require.Greater(t, ps.Pauses, uint64(2))
	require.Greater(t, ps.MaxPausedNs, int64(0))
	for _, li := range []int32{s.topo.hostPorts[1][0], s.topo.hostPorts[2][0]} {
		require.False(t, s.links[li].pfc.paused, "resumed by the end")
		require.Zero(t, s.links[li].pfc.inBytes, "everything left the switch")
	}
	// The leaf holds at most xoff plus headroom per ingress link.
	down := &s.links[s.topo.sws[0].down[0]]
	require.LessOrEqual(t, down.peakQueue, 2*s.links[s.topo.hostPorts[1][0]].pfc.limit)
}

// Back-pressure crosses the fabric: two senders on leaf 1 and one on
// leaf 0 into host 0. Leaf 0 pauses the spine's port, the spine pauses
// leaf 1's uplink, and leaf 1 pauses its hosts; every paused transmitter,
// switch ports included, sends nothing while paused, and nothing is lost.
func TestPFCPausesSwitchPorts(t *testing.T) {
	yaml := `
duration: 2ms
topology: {leaves: 2, hosts_per_leaf: 2, spines: 1, buffer: 20KiB, pfc: {enabled: true, xoff: 20KiB, xon: 10KiB}}
`
	script := map[int][]probeSend{
		1: spaced(150, 1, 0, 100, 1, 0, 4000),
		2: spaced(150, 1, 0, 300, 1, 0, 4000),
		3: spaced(150, 1, 0, 500, 1, 0, 4000),
	}
	s, w, log := runPFCProbe(t, yaml, script)
	require.Len(t, w[0].got, 450)
	require.Zero(t, s.Stats().BufferDrops)
	require.Zero(t, pfcStats(t, s).OverflowDrops)
	paused := checkPFCTrace(t, s, log)
	spine := &s.topo.sws[len(s.topo.sws)-1]
	require.True(t, paused[spine.down[0]], "the spine's port to leaf 0 was paused")
	require.True(t, paused[s.topo.sws[1].up[0]], "leaf 1's uplink was paused")
	require.True(t, paused[s.topo.hostPorts[2][0]] && paused[s.topo.hostPorts[3][0]], "leaf 1's hosts were paused")
}

// The ingress FIFO of a lossless switch port keeps order while it grows.
func TestPktRing(t *testing.T) {
	var r pktRing
	next := int32(0)
	for i := int32(0); i < 100; i++ {
		r.push(i)
		if i%3 == 0 {
			require.Equal(t, next, r.pop())
			next++
		}
	}
	for r.n > 0 {
		require.Equal(t, next, r.pop())
		next++
	}
	require.EqualValues(t, 100, next)
}

// pfcStats returns the lossless-mode counters of a run that has them.
func pfcStats(t *testing.T, s *Fabric) PFCStats {
	t.Helper()
	ps, ok := s.PFCStats()
	require.True(t, ok, "lossless mode is on")
	return ps
}
