package verbstest

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The stale-copy count rests on carriesOld: it must find the WRITE's
// bytes wherever a packet's payload starts in the WRITE, and nothing in
// bytes that are not the WRITE's.
func TestCarriesOldFindsOnlyTheWritesBytes(t *testing.T) {
	hdr := make([]byte, 40)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range hdr {
		hdr[i] = byte(r.Uint32())
	}
	for _, off := range []int{0, 1, 15, 16, 4095} {
		for _, n := range []int{staleRun, 100, 4096} {
			pkt := append([]byte(nil), hdr...)
			for i := range n {
				pkt = append(pkt, oldByte(off+i))
			}
			pkt = append(pkt, 1, 2, 3, 4)
			require.True(t, carriesOld(pkt), "payload of %d B from WRITE offset %d", n, off)
			require.False(t, carriesOld(pkt[:len(hdr)+staleRun-1]), "fewer than staleRun bytes")
		}
	}
	var other []byte
	for i := range 8192 {
		other = append(other, newByte(i), sendByte(i), 0xEE)
	}
	require.False(t, carriesOld(other), "the new and the SEND's patterns")
	noise := make([]byte, 1<<20)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	require.False(t, carriesOld(noise), "random bytes")
}
