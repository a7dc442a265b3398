package metaroce

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// TestPickerMatchesWalk drives the picker with random weight changes and
// picks on two planes, rebasing now and then, against the walk it
// replaces: every pick adds each weight to its path's credit, the highest
// credit (lowest index on ties) is chosen and pays the plane's total.
func TestPickerMatchesWalk(t *testing.T) {
	const n, planes = 40, 2
	paths := make([]txPath, n)
	for i := range paths {
		paths[i].plane = verbs.PlaneID(i % planes)
	}
	var pp PathPicker
	pp.reset(paths, planes)
	weight := make([]int, n)
	credit := make([]int64, n)
	rng := rand.New(rand.NewPCG(7, 8))
	picks := 0
	for step := 0; step < 20000; step++ {
		switch r := rng.IntN(10); {
		case r < 3:
			i, w := rng.IntN(n), rng.IntN(5) // few distinct weights: many ties
			if rng.IntN(8) == 0 {
				w = rng.IntN(maxPickWeight + 1)
			}
			pp.weigh(i, w)
			weight[i] = w
		case r == 3 && rng.IntN(50) == 0:
			pp.rebase(rng.IntN(planes))
		default:
			plane := rng.IntN(planes)
			best, total := -1, int64(0)
			for i := range paths {
				if int(paths[i].plane) != plane || weight[i] == 0 {
					continue
				}
				credit[i] += int64(weight[i])
				total += int64(weight[i])
				if best < 0 || credit[i] > credit[best] {
					best = i
				}
			}
			if best >= 0 {
				credit[best] -= total
				picks++
			}
			if got := pp.pick(plane); got != best {
				t.Fatalf("step %d plane %d: picked %d, the walk %d", step, plane, got, best)
			}
		}
		for i := range credit {
			if got := pp.credit(i); got != credit[i] {
				t.Fatalf("step %d path %d: credit %d, the walk's %d", step, i, got, credit[i])
			}
		}
	}
	if picks < 10000 {
		t.Fatalf("only %d successful picks", picks)
	}
}
