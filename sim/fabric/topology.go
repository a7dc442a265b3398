package fabric

import (
	"fmt"
	"sort"
)

// switchKind is a switch's tier.
type switchKind uint8

const (
	leafSwitch switchKind = iota
	spineSwitch
)

// swtch is an output-queued switch: its output ports are the links it
// sends on (each with its own buffer and ECN marker), and it forwards an
// arriving packet to one of them at once.
type swtch struct {
	kind  switchKind
	plane uint8
	index int32 // leaf or spine number within the plane
	salt  uint64
	down  []int32 // leaf: link to its j-th host; spine: link to leaf l
	up    []int32 // leaf: link to spine s
	// routes (leaves only): for each destination leaf, the uplinks routing
	// currently uses. Every spine at first; reconvergence removes spines
	// that cannot reach the destination leaf and puts them back when they
	// can again.
	routes [][]int32
}

// topology is the built fabric: nodes, links and names.
type topology struct {
	kind         string
	hosts        int
	planes       int
	leaves       int
	spines       int
	hostsPerLeaf int
	links        []link
	sws          []swtch
	hostPorts    [][]int32 // [host][plane] → the host's uplink on that plane
	cables       map[string][2]int32
	maxHops      int  // links on the longest host-to-host route
	modulo       bool // topology.ecmp modulo
}

// buildTopology wires the fabric tc, with the loss on its links and the
// failures that name them checked against it. seed salts the ECMP hashes and
// seeds every link's loss process and marker.
func buildTopology(tc *TopologyConfig, loss *LossConfig, failures []FailureConfig, seed uint64) (*topology, error) {
	t := &topology{kind: tc.Kind, hosts: tc.NumHosts(), planes: tc.Planes, leaves: tc.Leaves,
		spines: tc.Spines, hostsPerLeaf: tc.HostsPerLeaf, cables: map[string][2]int32{}, modulo: tc.ECMP == "modulo"}
	t.hostPorts = make([][]int32, t.hosts)
	for h := range t.hostPorts {
		t.hostPorts[h] = make([]int32, t.planes)
	}
	nicPs := 8e3 / tc.NICGbps // ps per byte
	fabPs := 8e3 / tc.FabricGbps
	delay := int64(tc.LinkDelay) * 1000
	// cable adds both directions of a cable between nodes a and b.
	cable := func(name string, plane int, a, b int32, ab, ba linkClass, ps float64) (int32, int32) {
		i := int32(len(t.links))
		mk := func(from, to int32, cl linkClass, rev int32) link {
			l := link{name: name, from: from, to: to, plane: uint8(plane), class: cl,
				psPerByte: ps, delayPs: delay, reverse: rev}
			if int(from) >= t.hosts { // a switch port: finite buffer, marks
				l.buffer = int64(tc.Buffer)
			}
			return l
		}
		t.links = append(t.links, mk(a, b, ab, i+1), mk(b, a, ba, i))
		t.cables[name] = [2]int32{i, i + 1}
		return i, i + 1
	}
	if t.kind == "back-to-back" {
		t.maxHops = 1
		for p := 0; p < t.planes; p++ {
			ab, ba := cable(fmt.Sprintf("p%d:host0-host1", p), p, 0, 1, linkDirect, linkDirect, nicPs)
			t.hostPorts[0][p], t.hostPorts[1][p] = ab, ba
		}
	} else {
		t.maxHops = 2
		if t.leaves > 1 {
			t.maxHops = 4
		}
		node := int32(t.hosts)
		for p := 0; p < t.planes; p++ {
			leaf0 := len(t.sws)
			for l := 0; l < t.leaves; l++ {
				t.sws = append(t.sws, swtch{kind: leafSwitch, plane: uint8(p), index: int32(l),
					salt: mix64(seed ^ uint64(p)<<40 ^ uint64(l)<<20 ^ 0x1eaf)})
			}
			spine0 := len(t.sws)
			for s := 0; s < t.spines; s++ {
				t.sws = append(t.sws, swtch{kind: spineSwitch, plane: uint8(p), index: int32(s),
					salt: mix64(seed ^ uint64(p)<<40 ^ uint64(s)<<20 ^ 0x5b1e)})
			}
			for l := 0; l < t.leaves; l++ {
				lf := &t.sws[leaf0+l]
				lnode := node + int32(leaf0+l)
				for j := 0; j < t.hostsPerLeaf; j++ {
					h := int32(l*t.hostsPerLeaf + j)
					up, down := cable(fmt.Sprintf("p%d:host%d-leaf%d", p, h, l), p, h, lnode, linkHostUp, linkHostDown, nicPs)
					t.hostPorts[h][p] = up
					lf.down = append(lf.down, down)
				}
			}
			for l := 0; l < t.leaves; l++ {
				for s := 0; s < t.spines; s++ {
					up, down := cable(fmt.Sprintf("p%d:leaf%d-spine%d", p, l, s), p,
						node+int32(leaf0+l), node+int32(spine0+s), linkFabric, linkFabric, fabPs)
					t.sws[leaf0+l].up = append(t.sws[leaf0+l].up, up)
					t.sws[spine0+s].down = append(t.sws[spine0+s].down, down)
				}
			}
		}
		for i := range t.sws {
			if t.sws[i].kind == leafSwitch {
				t.sws[i].routes = make([][]int32, t.leaves)
			}
		}
		t.reconverge()
	}
	// Loss and markers: every link gets its own random sources, seeded from
	// the run seed and its index.
	for i := range t.links {
		l := &t.links[i]
		if int(l.from) >= t.hosts {
			l.mark = newMarker(&tc.ECN, seed^0xec0, uint64(i))
		}
		rate := 0.0
		var bursty *BurstyConfig
		if loss.inScope(l.class) {
			rate, bursty = loss.Rate, loss.Bursty
		}
		if r, ok := loss.Links[l.name]; ok {
			rate = 1 - (1-rate)*(1-r)
		}
		if rate > 0 || bursty != nil {
			l.loss = lossState{rate: rate, bursty: bursty, rng: newRand(seed^0x1055, uint64(i))}
		}
	}
	rateNames := make([]string, 0, len(tc.LinkGbps))
	for name := range tc.LinkGbps {
		rateNames = append(rateNames, name)
	}
	sort.Strings(rateNames)
	for _, name := range rateNames {
		ab, ok := t.cables[name]
		if !ok {
			return nil, fmt.Errorf("topology.link_gbps: no link named %q (%s)", name, t.nameHint())
		}
		for _, i := range ab {
			t.links[i].psPerByte = 8e3 / tc.LinkGbps[name]
		}
	}
	lossNames := make([]string, 0, len(loss.Links))
	for name := range loss.Links {
		lossNames = append(lossNames, name)
	}
	sort.Strings(lossNames)
	for _, name := range lossNames {
		if _, ok := t.cables[name]; !ok {
			return nil, fmt.Errorf("loss.links: no link named %q (%s)", name, t.nameHint())
		}
	}
	for i, f := range failures {
		if f.Link != "" {
			if _, ok := t.cables[f.Link]; !ok {
				return nil, fmt.Errorf("failures[%d].link: no link named %q (%s)", i, f.Link, t.nameHint())
			}
		}
	}
	return t, nil
}

// nameHint shows what link names look like.
func (t *topology) nameHint() string {
	names := make([]string, 0, len(t.cables))
	for n := range t.cables {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 3 {
		names = names[:3]
	}
	return fmt.Sprintf("%d links, e.g. %v", len(t.cables), names)
}

// leafOf is the leaf a host hangs off (the same one in every plane).
func (t *topology) leafOf(h int32) int32 { return h / int32(t.hostsPerLeaf) }

// HostIP is host h's IPv4 address on plane p: 10.p.x.y with x.y = h+1
// (host 0 is 10.p.0.1), one subnet per plane as multi-plane NICs have.
func HostIP(h int32, p uint8) uint32 { return 10<<24 | uint32(p)<<16 | uint32(h+1)&0xffff }

// reconverge recomputes every leaf's routes from the links' current
// states: a spine is a next hop towards leaf d while the uplink to it and
// its downlink to d are up. A destination no spine reaches keeps no route
// (its packets are dropped and counted).
func (t *topology) reconverge() {
	spine0 := func(plane uint8) int { return int(plane)*(t.leaves+t.spines) + t.leaves }
	for i := range t.sws {
		lf := &t.sws[i]
		if lf.kind != leafSwitch {
			continue
		}
		for d := 0; d < t.leaves; d++ {
			r := lf.routes[d][:0]
			for s, up := range lf.up {
				sp := &t.sws[spine0(lf.plane)+s]
				if !t.links[up].down && !t.links[sp.down[d]].down {
					r = append(r, up)
				}
			}
			lf.routes[d] = r
		}
	}
}

// route returns the link a switch sends packet p on, or -1 if it has no
// route.
func (t *topology) route(sw *swtch, p *packet, dport uint16) int32 {
	dl := t.leafOf(p.dst)
	if sw.kind == spineSwitch {
		return sw.down[dl]
	}
	if dl == sw.index {
		return sw.down[p.dst-dl*int32(t.hostsPerLeaf)]
	}
	g := sw.routes[dl]
	switch len(g) {
	case 0:
		return -1
	case 1:
		return g[0]
	}
	if t.modulo {
		return g[int(p.sport)%len(g)]
	}
	k := flowKey{src: HostIP(p.src, p.plane), dst: HostIP(p.dst, p.plane), sport: p.sport, dport: dport}
	return g[ecmpPick(ecmpHash(sw.salt, k), len(g))]
}

// setCable fails or restores both directions of a cable.
func (t *topology) setCable(name string, down bool) {
	c := t.cables[name]
	t.links[c[0]].down = down
	t.links[c[1]].down = down
}

// setPlane fails or restores every link of a plane, host ports included.
func (t *topology) setPlane(p int, down bool) {
	for i := range t.links {
		if int(t.links[i].plane) == p {
			t.links[i].down = down
		}
	}
}

// baseRTT is the round trip of one full data packet out and one ACK back
// over the longest route of an idle fabric: serialization at every hop
// (store and forward) plus propagation.
func (t *topology) baseRTT(dataLen, ackLen int) int64 {
	var ps int64
	hops := t.maxHops
	// Host links at NIC rate; fabric links (the middle hops of a 4-hop
	// route) at the fabric rate.
	for i := 0; i < hops; i++ {
		var l *link
		switch {
		case t.kind == "back-to-back":
			l = &t.links[0]
		case hops == 4 && (i == 1 || i == 2):
			l = &t.links[t.sws[0].up[0]]
		default:
			l = &t.links[t.hostPorts[0][0]]
		}
		ps += l.serPs(int64(dataLen)+wireOverhead) + l.serPs(int64(ackLen)+wireOverhead) + 2*l.delayPs
	}
	return psToNs(ps)
}
