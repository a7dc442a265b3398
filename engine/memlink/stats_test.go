package memlink

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatsConservation(t *testing.T) {
	l := New(Config{
		Seed: 21, Delay: 100, RateBps: 40e9,
		Loss: 0.05, PathLoss: map[uint16]float64{2: 0.2},
		Bursty:  &GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.2, LossBad: 0.8, LossGood: 0.001},
		Reorder: 0.05, ReorderDelay: 700, Duplicate: 0.05, Corrupt: 0.05,
		Blackouts: []Blackout{{Entropy: 3, Plane: 1, At: 200_000}},
		Jitter:    300, Holds: []Hold{{Entropy: 1, AnyPlane: true, At: 100_000, Until: 150_000, Extra: 5000}},
	})
	for i := range 50_000 {
		l.Send(int64(i*10), Side(i%2), numbered(uint64(i), 100), PathKey{Entropy: uint16(i % 4), Plane: uint8(i % 2)})
	}
	got := drain(t, l)
	s := l.Stats()
	require.Equal(t, uint64(50_000), s.Sent)
	require.Equal(t, uint64(len(got)), s.Delivered)
	require.Equal(t, s.Sent-s.Dropped()+s.Duplicated, s.Delivered)
	for name, c := range map[string]uint64{
		"random": s.DroppedRandom, "path": s.DroppedPath, "burst": s.DroppedBurst, "blackout": s.DroppedBlackout,
		"duplicated": s.Duplicated, "corrupted": s.Corrupted, "reordered": s.Reordered,
		"held": s.Held,
	} {
		require.Positive(t, c, name)
	}
	require.Contains(t, s.String(), "sent=50000")
}
