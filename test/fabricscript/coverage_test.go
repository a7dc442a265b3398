package fabricscript

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The exact formula agrees with simulation, and the approximation is an
// upper bound that is tight when the probability is small.
func TestUnusedProbability(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{2, 8}, {4, 8}, {4, 16}, {8, 16}, {8, 32}} {
		const trials = 200000
		idle := 0
		for range trials {
			var used uint64
			for range c.k {
				used |= 1 << rng.IntN(c.n)
			}
			if used != 1<<c.n-1 {
				idle++
			}
		}
		got, exact, approx := float64(idle)/trials, UnusedExact(c.n, c.k), UnusedApprox(c.n, c.k)
		sigma := math.Sqrt(exact * (1 - exact) / trials)
		require.InDelta(t, exact, got, 5*sigma+1e-5, "n=%d k=%d", c.n, c.k)
		require.GreaterOrEqual(t, approx, exact, "n=%d k=%d", c.n, c.k)
		if exact < 0.05 {
			require.Less(t, approx/exact, 1.1, "n=%d k=%d", c.n, c.k)
		}
	}
	require.Equal(t, 0.0, UnusedExact(1, 1))
}

// docs/fabric.md carries the table this package computes.
func TestDocTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/fabric.md")
	require.NoError(t, err)
	want := CoverageTable([]int{2, 4, 8}, []int{8, 16, 32, 64})
	require.True(t, strings.Contains(string(doc), want), "docs/fabric.md must contain the table:\n%s", want)
}
