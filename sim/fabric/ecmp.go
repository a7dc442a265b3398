package fabric

// flowKey is the 5-tuple a switch hashes: source and destination IPv4
// addresses, protocol 17 (UDP), UDP source port (the transport's path
// entropy) and UDP destination port (the transport's port).
type flowKey struct {
	src, dst     uint32
	sport, dport uint16
}

// ecmpHash hashes a 5-tuple with a per-switch salt, as switches do to pick
// one of several equal-cost next hops: every packet of one 5-tuple takes
// the same next hop (so a path keeps its packets in order), different
// source ports spread evenly, and different switches (different salts)
// make independent choices, so there is no hash polarization between
// tiers. The mixer is a 64-bit finalizer (splitmix64's), which passes the
// avalanche tests; the exact function is ours, not any vendor's.
func ecmpHash(salt uint64, k flowKey) uint64 {
	x := uint64(k.src)<<32 | uint64(k.dst)
	y := uint64(k.sport)<<32 | uint64(k.dport)<<8 | 17
	return mix64(mix64(x^salt) ^ y)
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ecmpPick chooses one of n next hops for a hash.
func ecmpPick(h uint64, n int) int {
	// Multiply-shift maps the hash onto [0, n) without the bias a modulo
	// of a small n would have in the low bits.
	hi := (h >> 32) * uint64(n)
	return int(hi >> 32)
}
