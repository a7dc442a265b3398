package dpdkengine

import "github.com/metaroce/metaroce/metaroce"

// maxPeers bounds the neighbour table: static peers plus peers learned from
// arriving packets (a new source address gets the next free handle).
const maxPeers = 4096

// arpRetry is how often an unresolved neighbour is asked for again.
const arpRetry = 100 * 1000 * 1000 // 100ms in ns

type neighbour struct {
	used    bool
	ip      IPv4
	mac     MAC
	known   bool // mac is valid
	static  bool // mac came from the profile: ARP never changes it
	lastARP metaroce.Time
	asked   bool
}

// neighbours maps peer handles to addresses and back. Owned by one shard.
type neighbours struct {
	byPeer []neighbour
	byIP   map[IPv4]metaroce.PeerHandle
	next   metaroce.PeerHandle
}

func newNeighbours(static []Neighbour) (*neighbours, error) {
	t := &neighbours{byPeer: make([]neighbour, maxPeers), byIP: make(map[IPv4]metaroce.PeerHandle, 64)}
	for _, n := range static {
		ip, err := parseIP(n.IP)
		if err != nil {
			return nil, err
		}
		e := &t.byPeer[n.Peer]
		e.used, e.ip = true, ip
		if n.MAC != "" {
			e.mac, _ = parseMAC(n.MAC)
			e.known, e.static = true, true
		}
		t.byIP[ip] = metaroce.PeerHandle(n.Peer)
		t.next = max(t.next, metaroce.PeerHandle(n.Peer)+1)
	}
	return t, nil
}

// get returns the neighbour of a peer handle, or nil.
func (t *neighbours) get(p metaroce.PeerHandle) *neighbour {
	if int(p) >= len(t.byPeer) || !t.byPeer[p].used {
		return nil
	}
	return &t.byPeer[p]
}

// lookup returns the handle of ip, adding it when learn is set and there is
// room; ok is false when ip is unknown and was not added.
func (t *neighbours) lookup(ip IPv4, learn bool) (metaroce.PeerHandle, bool) {
	if p, ok := t.byIP[ip]; ok {
		return p, true
	}
	if !learn {
		return 0, false
	}
	for int(t.next) < len(t.byPeer) && t.byPeer[t.next].used {
		t.next++
	}
	if int(t.next) >= len(t.byPeer) {
		return 0, false
	}
	p := t.next
	t.next++
	t.byPeer[p] = neighbour{used: true, ip: ip}
	t.byIP[ip] = p
	return p, true
}

// learn records the MAC seen for a peer (unless the profile fixed it).
func (t *neighbours) learn(p metaroce.PeerHandle, mac MAC) {
	e := &t.byPeer[p]
	if !e.static && (!e.known || e.mac != mac) && mac != broadcastMAC && mac[0]&1 == 0 {
		e.mac, e.known = mac, true
	}
}
