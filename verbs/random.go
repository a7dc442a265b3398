package verbs

// Random is the source of the identifiers a transport core hands out that
// an outsider must not guess: connection ids, incarnations, memory keys
// and region addresses. The cores never read the OS's randomness (they are
// sans-I/O): the backend that builds a core passes one, a cryptographic
// source where packets come from a real network (engine.SecureRandom), or
// a seeded one (NewSeededRandom) where runs must be reproducible (the
// simulator, tests). Uint64 is called on the core's goroutine only, and
// never on a packet's path: only when a connection, a region or an
// endpoint is created.
type Random interface {
	Uint64() uint64
}

// SeededRandom is a deterministic Random (SplitMix64): the same seed gives
// the same sequence. It is reproducible, not secret: one output reveals the
// generator's state, so it is for simulations, tests and library users who
// ask for reproducibility, never for endpoints that face a real network.
type SeededRandom struct{ state uint64 }

// NewSeededRandom returns a SeededRandom that starts from seed.
func NewSeededRandom(seed uint64) *SeededRandom { return &SeededRandom{state: seed} }

// Uint64 returns the next value of the sequence.
func (r *SeededRandom) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	return Mix64(r.state)
}

// Mix64 is SplitMix64's finaliser: a bijection of 64-bit values whose every
// output bit depends on every input bit (for deriving values from others,
// not for secrecy).
func Mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
