package metaroce

import (
	"encoding/binary"
	"math/bits"
)

// sipKey is a 128-bit SipHash key.
type sipKey struct{ k0, k1 uint64 }

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, 2012) of the
// concatenation a || b under k, with a's length a multiple of 8 (the
// common header's first 24 bytes). It is the keyed hash of the packets'
// proof tags (token.go): a pseudorandom function of 128-bit key, 64-bit
// output, a few nanoseconds per 8 bytes, and no allocation. Taking two
// pieces lets the tag cover a packet without the field the tag is written
// in, with no copy.
func sipHash24(k sipKey, a, b []byte) uint64 {
	v0 := k.k0 ^ 0x736f6d6570736575
	v1 := k.k1 ^ 0x646f72616e646f6d
	v2 := k.k0 ^ 0x6c7967656e657261
	v3 := k.k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	word := func(m uint64) {
		v3 ^= m
		round()
		round()
		v0 ^= m
	}
	n := len(a) + len(b)
	for ; len(a) >= 8; a = a[8:] {
		word(binary.LittleEndian.Uint64(a))
	}
	for ; len(b) >= 8; b = b[8:] {
		word(binary.LittleEndian.Uint64(b))
	}
	last := uint64(n) << 56
	for i, x := range b {
		last |= uint64(x) << (8 * i)
	}
	word(last)
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
