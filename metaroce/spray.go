package metaroce

// PathPicker chooses the path for each new packet. It is the one piece of
// the spraying policy; the congestion-control work replaces its weights
// with live telemetry (RTT, ECN, utilisation).
//
// The policy is smooth weighted round robin, each path weighted by its
// free window scaled by how fast it is (txPath.speed: the smoothed RTT of
// the connection's fastest path over the path's own): deterministic (no random
// numbers, so simulations repeat exactly), it interleaves paths packet by
// packet, sends more where there is more room, and less down a path whose
// RTT has risen (a queue on its route, a slow link) before ECN marks or
// losses have cut its window.
type PathPicker struct {
	credit []int
}

func (pp *PathPicker) reset(n int) { pp.credit = make([]int, n) }

// speedOne is the speed of a path as fast as the connection's fastest.
const speedOne = 256

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
		r = max(1, r*paths[i].speed/speedOne)
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

// updateSpeed sets p's spraying speed after an RTT sample: relative to the
// connection's fastest path now (c.fastest, or p itself if faster), not to
// the smallest RTT ever seen, so a queue that slows every path alike (the
// receiver's port) changes nothing.
func (c *Conn) updateSpeed(p *txPath) {
	fastest := c.fastest
	if fastest == 0 || p.srtt < fastest {
		fastest = p.srtt
	}
	p.speed = speedOne
	if p.srtt > fastest && fastest > 0 {
		p.speed = max(1, int(int64(speedOne)*int64(fastest)/int64(p.srtt)))
	}
}
