package metaroce_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// scenario is one randomly drawn transfer over one connection: its shape
// (paths, planes, streams, MTU, window, rate hints) and the harness's
// transfer (internal/verbstest: link impairments and work requests, one
// queue pair per stream).
type scenario struct {
	verbstest.Scenario
	paths    int
	planes   int
	mtu      int
	window   int
	blackout bool
	linkRate float64 // Config.LinkRateBps of both ends: 0 = no rate hints
}

func (s scenario) String() string {
	return fmt.Sprintf("seed=%d paths=%d planes=%d streams=%d mtu=%d window=%d loss=%.3f bursty=%v pathloss=%v pathdelay=%v blackout=%v reorder=%.3f dup=%.3f corrupt=%.4f ops=%d hints=%.0fGb/s",
		s.Seed, s.paths, s.planes, s.QPs, s.mtu, s.window, s.Link.Loss, s.Link.Bursty != nil, s.Link.PathLoss, s.Link.PathDelay != nil,
		s.blackout, s.Link.Reorder, s.Link.Duplicate, s.Link.Corrupt, len(s.Ops), s.linkRate/1e9)
}

// drawScenario draws what metaroce must survive beyond the shared
// impairments: up to 256 paths on up to 4 planes, one much lossier path,
// a path that goes black, and rate hints.
func drawScenario(seed uint64, maxSize, budget int) scenario {
	r := rand.New(rand.NewPCG(seed, 0x6d657461))
	s := scenario{Scenario: verbstest.Scenario{Seed: seed}}
	switch r.IntN(4) {
	case 0:
		s.paths = 1
	case 1:
		s.paths = 1 + r.IntN(8)
	case 2:
		s.paths = 1 + r.IntN(64)
	default:
		s.paths = 1 + r.IntN(256)
	}
	s.QPs = 1 + r.IntN(64)
	s.planes = 1 + r.IntN(4)
	s.mtu = []int{256, 1024, 4096}[r.IntN(3)]
	s.window = []int{8, 32, 64, 256}[r.IntN(4)]
	s.Link = verbstest.DrawLink(r, seed)
	switch r.IntN(4) {
	case 0: // bursty loss
		s.Link.Bursty = verbstest.BurstyLoss()
	case 1: // one path much lossier than the others
		s.Link.PathLoss = map[uint16]float64{49152 + uint16(r.IntN(s.paths)): 0.3}
	}
	verbstest.DrawPathDelay(r, &s.Link)
	if s.paths >= 2 && r.IntN(4) == 0 {
		// A path goes black early on; its traffic must move elsewhere.
		s.Link.Blackouts = []memlink.Blackout{{Entropy: 49152 + uint16(r.IntN(s.paths)), AnyPlane: true, At: int64(r.IntN(200000))}}
		s.blackout = true
	}
	s.Ops = verbstest.DrawOps(r, s.QPs, maxSize, budget)
	// Congestion control with rate hints (drawn last, so earlier seeds keep
	// their scenarios): none, the link's own rate, or far below it, so
	// that pacing and the in-flight cap hold the sender back.
	s.linkRate = []float64{0, 100e9, 5e9}[r.IntN(3)]
	s.Name = s.String()
	return s
}

// harness runs s on one connection whose streams are the queue pairs.
func (s scenario) harness() verbstest.Harness {
	cfg := mr.Config{Paths: s.paths, Planes: s.planes, Streams: 64, MTU: s.mtu, PathWindow: s.window, LinkRateBps: s.linkRate}
	conns := func(ss []verbs.Session) (c []*mr.Conn) {
		for _, x := range ss {
			c = append(c, x.(mr.Session).C)
		}
		return c
	}
	return verbstest.Harness{
		Devices: func(t *testing.T, link memlink.Config) (*mempair.Pair, verbs.Device, verbs.Device) {
			p, err := mempair.New(cfg, cfg, link)
			require.NoError(t, err, s.Name)
			return p, p.EP[0].Device(), p.EP[1].Device()
		},
		Limit: 60e9,
		Check: func(t *testing.T, a verbs.Session) {
			require.Equal(t, s.paths, a.(mr.Session).C.NumPaths(), s.Name)
		},
		Describe: func(a, b []verbs.Session) string {
			return fmt.Sprintf("\n A=%+v\n B=%+v", *conns(a)[0].Counters(), *conns(b)[0].Counters())
		},
		Dump: func(a, b []verbs.Session) string {
			return mr.DebugString(conns(a)[0]) + "\n" + mr.DebugString(conns(b)[0])
		},
	}
}

// TestPropertyDeliveryUnderImpairments is the core's main property: over
// many seeds, random shapes and impairments, every byte lands exactly
// where it belongs, nothing else changes, and every work request completes
// once, successfully, in order within its stream.
// METAROCE_SEEDS=N[@FIRST] widens the search (make test keeps 60).
func TestPropertyDeliveryUnderImpairments(t *testing.T) {
	verbstest.Property(t, "METAROCE_SEEDS", 60, 10, func(seed uint64) (verbstest.Scenario, verbstest.Harness) {
		s := drawScenario(seed, 4<<20, 6<<20)
		return s.Scenario, s.harness()
	})
}
