package fabric

import "math/rand/v2"

// newRand returns a PCG source seeded from two words: every random process
// of a run (a link's loss, a port's RED marks) gets its own, so the draws
// of one never depend on how often another drew.
func newRand(a, b uint64) *rand.Rand {
	return rand.New(rand.NewPCG(mix64(a), mix64(b^0x9e3779b97f4a7c15)))
}
