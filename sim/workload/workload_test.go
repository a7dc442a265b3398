package workload

import (
	"github.com/metaroce/metaroce/verbs"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJain(t *testing.T) {
	require.Equal(t, 1.0, jain([]float64{3, 3, 3, 3}))
	require.Equal(t, 0.25, jain([]float64{8, 0, 0, 0}))
	require.Equal(t, 1.0, jain([]float64{0, 0}))
	require.InDelta(t, 0.5, jain([]float64{1, 1, 0, 0}), 1e-12)
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	require.Equal(t, 3.0, percentile(xs, 50))
	require.Equal(t, 5.0, percentile(xs, 99))
	require.Equal(t, 5.0, percentile(xs, 100))
	require.Nil(t, percentile(nil, 50))
}

// settledFrom finds the first bin from which every window satisfies the
// condition to the end, ignoring a dip that recovers before it.
func TestSettledFrom(t *testing.T) {
	m := meter{}
	rates := []float64{10, 10, 0, 0, 10, 2, 10, 10, 10, 10}
	for i, r := range rates {
		m.t = append(m.t, verbs.Time((i+1)*1000))
		m.total = append(m.total, r*1000/8) // bytes in a 1 µs bin at r Gb/s
	}
	ok := func(j int) bool { return m.windowRate(j, 1) >= 9 }
	require.Equal(t, 6, m.settledFrom(0, 10000, 1, ok))
	// With 2-bin windows, the window ending at bin 6 averages 6 Gb/s.
	ok2 := func(j int) bool { return m.windowRate(j, 2) >= 9 }
	require.Equal(t, 6, m.settledFrom(0, 10000, 2, ok2))
	never := func(int) bool { return false }
	require.Equal(t, -1, m.settledFrom(0, 10000, 1, never))
	require.InDelta(t, 10, m.avg(6000, 10000), 1e-9)
	require.InDelta(t, 10, m.rate(0), 1e-9)
}
