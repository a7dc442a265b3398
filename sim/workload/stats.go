package workload

import (
	"math"
	"sort"
)

// percentile returns the p-th percentile (nearest rank) of xs, or nil
// when xs is empty (the JSON shows null: there is no such figure).
func percentile(xs []float64, p float64) any {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	k = max(0, min(k, len(s)-1))
	return s[k]
}
