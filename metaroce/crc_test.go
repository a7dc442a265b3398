package metaroce_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	mr "github.com/metaroce/metaroce/metaroce"
)

// SealCRCCopy builds, byte for byte, the packet that copy and then SealCRC
// build, at header lengths a data packet has and at payload lengths on
// both sides of the fused pass's 256 bytes, up to a jumbo MTU.
func TestSealCRCCopyEqualsCopyThenSeal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 9000)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	checked := 0
	for _, hdr := range []int{mr.HeaderLen + 6, mr.HeaderLen + 26, mr.HeaderLen + 34} {
		for _, n := range []int{0, 1, 63, 64, 255, 256, 257, 1000, 1024, 4096, 8192, 9000} {
			want := make([]byte, hdr+n+mr.CRCLen)
			got := make([]byte, len(want))
			for i := range hdr {
				want[i] = byte(r.Uint32())
			}
			copy(got, want[:hdr])
			payload := src[len(src)-n:]
			copy(want[hdr:], payload)
			wl := mr.SealCRC(want, hdr+n)
			gl := mr.SealCRCCopy(got, hdr, payload)
			if gl != wl || !bytes.Equal(got, want) {
				t.Fatalf("header %d, payload %d: length %d against %d, or bytes differ", hdr, n, gl, wl)
			}
			checked++
		}
	}
	if checked != 36 {
		t.Fatalf("checked %d packets", checked)
	}
}
