package metaroce

import (
	"encoding/binary"
	"testing"
)

// The reference vectors of SipHash-2-4 (the paper's Appendix A and the
// authors' vectors.h): key 00 01 .. 0f, messages 00 01 .. (n-1) for n =
// 0..63; the first, fifteenth and last of them, and the paper's example.
func TestSipHashVectors(t *testing.T) {
	var kb [16]byte
	for i := range kb {
		kb[i] = byte(i)
	}
	k := sipKey{binary.LittleEndian.Uint64(kb[:8]), binary.LittleEndian.Uint64(kb[8:])}
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	want := map[int]uint64{
		0:  0x726fdb47dd0e0e31,
		15: 0xa129ca6149be45e5,
		63: 0x958a324ceb064572,
	}
	for n, w := range want {
		if got := sipHash24(k, nil, msg[:n]); got != w {
			t.Errorf("n=%d: %#x, want %#x", n, got, w)
		}
		// Split at every multiple of 8: the same value.
		for s := 8; s <= n; s += 8 {
			if got := sipHash24(k, msg[:s], msg[s:n]); got != w {
				t.Errorf("n=%d split %d: %#x, want %#x", n, s, got, w)
			}
		}
	}
	if len(want) != 3 {
		t.Fatal("vectors")
	}
}

func BenchmarkSipHashAck(b *testing.B) {
	p := make([]byte, 24+4+24)
	k := sipKey{1, 2}
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		p[0] = byte(sipHash24(k, p[:24], p[24:]))
	}
}
