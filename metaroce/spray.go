package metaroce

// PathPicker chooses the path for each new packet. It is the one piece of
// the spraying policy; the congestion-control work replaces its weights
// with live telemetry (RTT, ECN, utilisation).
//
// The current policy is smooth weighted round robin with each path's
// weight equal to its free window: deterministic (no random numbers, so
// simulations repeat exactly), it interleaves paths packet by packet and
// sends more where there is more room.
type PathPicker struct {
	credit []int
}

func (pp *PathPicker) reset(n int) { pp.credit = make([]int, n) }

// anyPlane asks pick for a path on whatever plane.
const anyPlane = -1

// pick returns the index of the chosen path among those on plane (or on
// any plane, for anyPlane), or -1 when none of them has room.
func (pp *PathPicker) pick(paths []txPath, plane int) int {
	best, total := -1, 0
	for i := range paths {
		if plane != anyPlane && int(paths[i].plane) != plane {
			continue
		}
		r := paths[i].room()
		if r <= 0 {
			continue
		}
		total += r
		pp.credit[i] += r
		if best < 0 || pp.credit[i] > pp.credit[best] {
			best = i
		}
	}
	if best >= 0 {
		pp.credit[best] -= total
	}
	return best
}
