package engine

import "testing"

// SecureRandom's values are distinct and use every bit: 4096 draws, no
// repeat, and every bit position both set and clear somewhere.
func TestSecureRandom(t *testing.T) {
	r := SecureRandom()
	seen := map[uint64]bool{}
	var or, and uint64 = 0, ^uint64(0)
	for range 4096 {
		x := r.Uint64()
		seen[x] = true
		or, and = or|x, and&x
	}
	if len(seen) != 4096 || or != ^uint64(0) || and != 0 {
		t.Fatalf("%d distinct of 4096, bits ever set %#x, always set %#x", len(seen), or, and)
	}
}
