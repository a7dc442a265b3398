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
	entries []pickEntry // one per path
	planes  []pickPlane // by plane id (one when the connection has one plane)
	// moved is 1 + the path whose credit the last pick lowered while its
	// group's heap still holds the old key (0: none): the packet the pick
	// was for takes room on that path, and weigh then moves it to the
	// group of its new weight, so updating the old group first would be
	// wasted. The next pick or rebase updates it if weigh did not
	// (settleMoved). A heap's keys are distinct and only its top is
	// read, so the result does not depend on when the key is updated.
	moved int
}

// speedOne is the speed of a path as fast as the connection's fastest.
const speedOne = 256

// anyPlane asks pick for a path on whatever plane.
const anyPlane = -1

// maxPickWeight bounds a path's weight: room (at most SackBits) scaled by
// a speed of at most speedOne.
const maxPickWeight = SackBits

// The picker does not add every path's weight to its credit on every pick
// (a walk over every path per packet). While a path's weight w stays the
// same, its credit after the plane's n-th pick is a + w·n, so only a
// change of weight (a path's room or speed, which only the path's own
// events change: Conn.pathChanged) folds the credit into a new a. The
// path with the highest credit is, for each weight, the one with the
// highest a (then the lowest index), so one heap per weight in use finds
// it: a pick costs the number of distinct weights, at most the path window,
// whatever the number of paths, and chooses exactly what adding every
// weight to every credit chose.
type pickEntry struct {
	plane int
	w     int   // weight while the path has room; 0: no room, a is its credit
	a     int64 // credit = a + w·n (n: its plane's picks so far)
}

type pickPlane struct {
	n      int64 // picks so far
	sum    int   // the weights of the paths with room
	groups []pickGroup
	free   []int16                  // indexes of empty groups, for the next weight that needs one
	group  [maxPickWeight + 1]int16 // weight -> index in groups + 1
	paths  int                      // the paths on this plane: no group holds more
	pos    []int32                  // the groups' heap positions, by path (a path is in one group at most)
}

// pickGroup holds the paths of one weight, highest a first.
type pickGroup struct {
	w int
	h idxHeap // path indexes by pickKey
}

// pickKey orders a group's heap: highest a first, then lowest path index
// (the walk's tie-break). |a| stays below about 2^41 (pickRebase), so the
// key cannot overflow.
func pickKey(a int64, i int) int64 { return -a*(MaxPaths+1) + int64(i) }

// pickRebase is the number of a plane's picks after which its credits are
// rewritten for n = 0, so that a + w·n stays small.
const pickRebase = 1 << 32

func (pp *PathPicker) reset(paths []txPath, planes int) {
	pp.moved = 0
	pp.entries = make([]pickEntry, len(paths))
	pp.planes = make([]pickPlane, max(planes, 1))
	for i := range pp.planes {
		pp.planes[i].pos = make([]int32, len(paths))
	}
	for i := range paths {
		pp.entries[i] = pickEntry{plane: int(paths[i].plane)}
		pp.planes[paths[i].plane].paths++
	}
}

// credit is path i's credit now.
func (pp *PathPicker) credit(i int) int64 {
	e := &pp.entries[i]
	return e.a + int64(e.w)*pp.planes[e.plane].n
}

// weigh gives path i weight w (0: no room) from now on.
func (pp *PathPicker) weigh(i, w int) {
	e := &pp.entries[i]
	if e.w == w {
		return
	}
	pl := &pp.planes[e.plane]
	credit := pp.credit(i)
	if e.w > 0 {
		if pp.moved == i+1 {
			pp.moved = 0 // its key leaves the heap with it
		}
		g := pl.group[e.w]
		h := &pl.groups[g-1].h
		h.Remove(i)
		pl.sum -= e.w
		if h.Len() == 0 {
			// Kept, heap and all, for the next weight: a connection
			// has few weights at once but meets many in its life, and
			// a group per weight ever seen would grow without end.
			pl.group[e.w] = 0
			pl.free = append(pl.free, g)
		}
	}
	e.w, e.a = w, credit
	if w > 0 {
		e.a = credit - int64(w)*pl.n
		g := pl.group[w]
		if g == 0 {
			if n := len(pl.free); n > 0 {
				g = pl.free[n-1]
				pl.free = pl.free[:n-1]
				pl.groups[g-1].w = w
			} else {
				pl.groups = append(pl.groups, pickGroup{w: w, h: newIdxHeap(pl.paths, pl.pos)})
				g = int16(len(pl.groups))
			}
			pl.group[w] = g
		}
		pl.groups[g-1].h.Set(i, pickKey(e.a, i))
		pl.sum += w
	}
}

// pathWeight is p's spraying weight: its room scaled by its speed (0 when
// it has no room).
func pathWeight(p *txPath) int {
	r := p.room()
	if r <= 0 {
		return 0
	}
	return max(1, r*p.speed/speedOne)
}

// pick returns the index of the chosen path among those on plane (or on
// any plane, for anyPlane: the connection has one), or -1 when none of
// them has room.
func (pp *PathPicker) pick(plane int) int {
	if plane == anyPlane {
		plane = 0
	}
	pp.settleMoved()
	pl := &pp.planes[plane]
	if pl.sum == 0 {
		return -1
	}
	pl.n++
	best, bestCredit := -1, int64(0)
	for gi := range pl.groups {
		g := &pl.groups[gi]
		if g.h.Len() == 0 {
			continue
		}
		i := g.h.Top()
		c := pp.entries[i].a + int64(g.w)*pl.n
		if best < 0 || c > bestCredit || (c == bestCredit && i < best) {
			best, bestCredit = i, c
		}
	}
	e := &pp.entries[best]
	e.a -= int64(pl.sum)
	pp.moved = best + 1 // its heap key follows later (settleMoved, weigh)
	if pl.n >= pickRebase {
		pp.rebase(plane)
	}
	return best
}

// settleMoved brings the heap key of the path the last pick chose up to
// date, if weigh has not moved it since (PathPicker.moved).
func (pp *PathPicker) settleMoved() {
	if pp.moved == 0 {
		return
	}
	i := pp.moved - 1
	pp.moved = 0
	e := &pp.entries[i]
	pl := &pp.planes[e.plane]
	pl.groups[pl.group[e.w]-1].h.Set(i, pickKey(e.a, i))
}

// rebase rewrites plane's credits for n = 0.
func (pp *PathPicker) rebase(plane int) {
	pp.settleMoved()
	pl := &pp.planes[plane]
	for i := range pp.entries {
		if e := &pp.entries[i]; e.plane == plane && e.w > 0 {
			e.a += int64(e.w) * pl.n
			pl.groups[pl.group[e.w]-1].h.Set(i, pickKey(e.a, i))
		}
	}
	pl.n = 0
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
