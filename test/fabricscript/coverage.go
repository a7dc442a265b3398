package fabricscript

import (
	"fmt"
	"math"
	"strings"
)

// UnusedApprox is the union bound on the probability that k source ports,
// each hashed uniformly and independently onto one of n spines, leave at
// least one spine unused: n(1-1/n)^k (the expected number of unused
// spines, so an upper bound, and close to the exact value when small).
func UnusedApprox(n, k int) float64 {
	return float64(n) * math.Pow(1-1/float64(n), float64(k))
}

// UnusedExact is the same probability by inclusion-exclusion:
// sum over j=1..n of (-1)^(j+1) C(n,j) (1-j/n)^k.
func UnusedExact(n, k int) float64 {
	p, c := 0.0, 1.0
	for j := 1; j <= n; j++ {
		c = c * float64(n-j+1) / float64(j)
		term := c * math.Pow(1-float64(j)/float64(n), float64(k))
		if j%2 == 1 {
			p += term
		} else {
			p -= term
		}
	}
	return max(p, 0)
}

// CoverageTable is the Markdown table docs/fabric.md shows: for each
// number of spines, the chance that k paths leave a spine idle.
func CoverageTable(spines, paths []int) string {
	var b strings.Builder
	b.WriteString("| spines N |")
	for _, k := range paths {
		fmt.Fprintf(&b, " k=%d |", k)
	}
	b.WriteString("\n|---|")
	for range paths {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, n := range spines {
		fmt.Fprintf(&b, "| %d |", n)
		for _, k := range paths {
			fmt.Fprintf(&b, " %s (%s) |", sci(UnusedApprox(n, k)), sci(UnusedExact(n, k)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// sci prints p with two significant digits, plainly when it is not tiny.
func sci(p float64) string {
	if p >= 0.01 {
		return fmt.Sprintf("%.2f", p)
	}
	return fmt.Sprintf("%.1e", p)
}
