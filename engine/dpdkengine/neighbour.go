//go:build dpdk

package dpdkengine

import (
	"sync"
	"sync/atomic"

	"github.com/metaroce/metaroce/verbs"
)

// maxPeers bounds the neighbour table: static peers plus peers learned from
// arriving packets (a new source address gets the next free handle).
const maxPeers = 4096

// DefaultMaxLearnedPeers is Config.MaxLearnedPeers's default.
const DefaultMaxLearnedPeers = 64

// arpRetry is how often an unresolved neighbour is asked for again.
const arpRetry = 100 * 1000 * 1000 // 100ms in ns

const (
	macKnown  = uint64(1) << 63
	macStatic = uint64(1) << 62
)

// neighTable is the engine's neighbour table, shared by its shards: an ARP
// reply reaches one shard (the lcore loop sends ARP to shard 0), but every
// shard must learn from it. Handles and addresses are assigned under mu
// and never change afterwards; MACs are atomics, read on every sent packet
// without a lock. A peer has one IPv4 address but a MAC per port: on
// every plane it is reached through a different NIC (and next hop).
type neighTable struct {
	mu   sync.Mutex
	byIP map[IPv4]verbs.PeerHandle
	next verbs.PeerHandle
	ip   [maxPeers]IPv4
	used [maxPeers]atomic.Bool
	mac  [][maxPeers]atomic.Uint64 // per port: macKnown | macStatic | 48-bit MAC
	// learned counts the peers added from arriving packets, at most
	// maxLearned (Config.MaxLearnedPeers); refused counts the sources
	// turned away.
	learned, maxLearned int
	refused             atomic.Uint64
}

// How lookup may add an address it does not know.
type learnMode uint8

const (
	noLearn   learnMode = iota // find only
	learnTold                  // the application names it (AddPeer, the gateway): always, while there is room
	learnData                  // a packet came from it: within MaxLearnedPeers
)

func newNeighTable(static []Neighbour, ports, maxLearned int) (*neighTable, error) {
	switch {
	case maxLearned == 0:
		maxLearned = DefaultMaxLearnedPeers
	case maxLearned < 0:
		maxLearned = 0
	}
	t := &neighTable{byIP: make(map[IPv4]verbs.PeerHandle), mac: make([][maxPeers]atomic.Uint64, ports), maxLearned: maxLearned}
	for _, n := range static {
		ip, err := parseIP(n.IP)
		if err != nil {
			return nil, err
		}
		t.ip[n.Peer] = ip
		t.used[n.Peer].Store(true)
		if n.MAC != "" {
			m, err := parseMAC(n.MAC)
			if err != nil {
				return nil, err
			}
			for i := range t.mac { // a static MAC holds on every port
				t.mac[i][n.Peer].Store(macKnown | macStatic | macBits(m))
			}
		}
		t.byIP[ip] = verbs.PeerHandle(n.Peer)
		t.next = max(t.next, verbs.PeerHandle(n.Peer)+1)
	}
	return t, nil
}

func macBits(m MAC) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

func bitsMAC(v uint64) MAC {
	return MAC{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// neighbours is one shard's view of the table: a private cache of the
// address-to-handle map (no lock per packet) and its own ARP timers (per
// port and peer: index port*maxPeers+peer).
type neighbours struct {
	t       *neighTable
	cache   map[IPv4]verbs.PeerHandle
	lastARP []verbs.Time
	asked   []bool

	lastIP   IPv4 // the last address looked up, and its handle
	lastPeer verbs.PeerHandle
	hasLast  bool
}

func newNeighbours(t *neighTable) *neighbours {
	n := len(t.mac) * maxPeers
	return &neighbours{t: t, cache: make(map[IPv4]verbs.PeerHandle, 64),
		lastARP: make([]verbs.Time, n), asked: make([]bool, n)}
}

// addr returns a peer's IPv4 address and its MAC on port i (known false
// when not resolved yet); ok is false for a handle nobody assigned.
func (n *neighbours) addr(p verbs.PeerHandle, i int) (ip IPv4, mac MAC, known, ok bool) {
	if int(p) >= maxPeers || !n.t.used[p].Load() {
		return ip, mac, false, false
	}
	v := n.t.mac[i][p].Load()
	return n.t.ip[p], bitsMAC(v), v&macKnown != 0, true
}

// lookup returns the handle of ip, adding it to the shared table as mode
// allows and while there is room; ok is false when ip is unknown and was
// not added.
func (n *neighbours) lookup(ip IPv4, mode learnMode) (verbs.PeerHandle, bool) {
	if n.hasLast && ip == n.lastIP { // bursts mostly come from one peer
		return n.lastPeer, true
	}
	if p, ok := n.cache[ip]; ok {
		n.lastIP, n.lastPeer, n.hasLast = ip, p, true
		return p, true
	}
	t := n.t
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.byIP[ip]
	if !ok {
		switch {
		case mode == noLearn:
			return 0, false
		case mode == learnData && t.learned >= t.maxLearned:
			t.refused.Add(1)
			return 0, false
		}
		for int(t.next) < maxPeers && t.used[t.next].Load() {
			t.next++
		}
		if int(t.next) >= maxPeers {
			return 0, false
		}
		p = t.next
		t.next++
		if mode == learnData {
			t.learned++
		}
		t.ip[p] = ip
		t.used[p].Store(true)
		t.byIP[ip] = p
	}
	n.cache[ip] = p
	return p, true
}

// known reports whether p's MAC on port i is resolved.
func (n *neighbours) known(p verbs.PeerHandle, i int) bool {
	return n.t.mac[i][p].Load()&macKnown != 0
}

// learn records the MAC seen for a peer on port i, unless the profile
// fixed it. It reports whether the peer had no MAC there before.
func (n *neighbours) learn(p verbs.PeerHandle, i int, mac MAC) bool {
	if mac == broadcastMAC || mac[0]&1 != 0 {
		return false
	}
	m := &n.t.mac[i][p]
	for {
		old := m.Load()
		if old&macStatic != 0 || (old&macKnown != 0 && bitsMAC(old) == mac) {
			return false
		}
		if m.CompareAndSwap(old, macKnown|macBits(mac)) {
			return old&macKnown == 0
		}
	}
}
