package metaroce

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The SACK window is 256 PSNs wide and PSNs are 32-bit serial numbers.
// These tests assert the numbers themselves, not only their properties: a
// 64-bit window (a sizeof slip) or a 16-bit PSN would pass many property
// tests and fail here.
func TestSackIntendedNumbers(t *testing.T) {
	require.Equal(t, 256, SackBits)
	require.Equal(t, 4, sackWords)
	require.Equal(t, SackBits, 64*len(SackBitmap{}))
	require.Equal(t, uintptr(32), unsafe.Sizeof(SackBitmap{}))
	require.Equal(t, uintptr(4), unsafe.Sizeof(PSN(0)))
	zero, top := PSN(0), PSN(1<<32-1)
	zero--
	top++
	require.Equal(t, PSN(0xFFFFFFFF), zero, "PSN wraps at 2^32")
	require.Equal(t, PSN(0), top)

	// A full bitmap has exactly 256 set bits, numbered 0..255.
	var b SackBitmap
	for i := 0; i < SackBits; i++ {
		require.False(t, b.Has(i))
		b[i/64] |= 1 << (i % 64)
		require.True(t, b.Has(i))
		require.Equal(t, i, b.Highest())
	}
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}, b)
}

func TestScoreboardWindowEdges(t *testing.T) {
	var s rxScoreboard
	require.Equal(t, PSN(0), s.cum)
	require.Equal(t, psnNew, s.classify(0))
	require.Equal(t, psnNew, s.classify(1))
	require.Equal(t, psnNew, s.classify(255))
	require.Equal(t, psnNew, s.classify(256), "cum+256 is bit 255: the last trackable PSN")
	require.Equal(t, psnBeyond, s.classify(257), "cum+257 is beyond the 256-bit window")
	require.Equal(t, psnBeyond, s.classify(1000))
	require.Equal(t, psnBeyond, s.classify(1<<31-1))
	require.Equal(t, psnDuplicate, s.classify(0xFFFFFFFF), "cum-1 (across the wrap) is old")
	require.Equal(t, psnDuplicate, s.classify(1<<31+1))

	// The same at an arbitrary cumulative point.
	s.cum = 1000
	require.Equal(t, psnDuplicate, s.classify(999))
	require.Equal(t, psnDuplicate, s.classify(0))
	require.Equal(t, psnNew, s.classify(1000))
	require.Equal(t, psnNew, s.classify(1256))
	require.Equal(t, psnBeyond, s.classify(1257))

	// Marking cum+256 sets bit 255, the highest bit of word 3.
	s.mark(1256)
	require.Equal(t, SackBitmap{0, 0, 0, 1 << 63}, s.sack)
	require.Equal(t, 255, s.sack.Highest())
	require.True(t, s.sack.Has(255))
	require.Equal(t, psnDuplicate, s.classify(1256))
	require.Equal(t, PSN(1000), s.cum)
	// Marking cum+1 sets bit 0.
	s.mark(1001)
	require.Equal(t, SackBitmap{1, 0, 0, 1 << 63}, s.sack)
}

func TestScoreboardInOrder(t *testing.T) {
	var s rxScoreboard
	for psn := PSN(0); psn < 1000; psn++ {
		require.Equal(t, psnNew, s.classify(psn))
		s.mark(psn)
		require.Equal(t, psn+1, s.cum)
		require.Equal(t, SackBitmap{}, s.sack)
		require.Equal(t, psnDuplicate, s.classify(psn))
	}
}

func TestScoreboardOutOfOrderRuns(t *testing.T) {
	var s rxScoreboard
	s.mark(2)
	s.mark(3)
	require.Equal(t, PSN(0), s.cum)
	require.Equal(t, SackBitmap{0b110}, s.sack, "PSN cum+1+i is bit i")
	require.Equal(t, psnDuplicate, s.classify(2))
	require.Equal(t, psnNew, s.classify(1))

	s.mark(0) // cum moves to 1; 2 and 3 shift to bits 0 and 1
	require.Equal(t, PSN(1), s.cum)
	require.Equal(t, SackBitmap{0b11}, s.sack)

	s.mark(1) // fills the gap: cum moves past the run 1,2,3
	require.Equal(t, PSN(4), s.cum)
	require.Equal(t, SackBitmap{}, s.sack)

	// A gap right after cum stops the run at once.
	s.mark(6) // cum 4: bit 1
	s.mark(8) // bit 3
	require.Equal(t, SackBitmap{0b1010}, s.sack)
	s.mark(4) // cum moves to 5 only: 5 is missing
	require.Equal(t, PSN(5), s.cum)
	require.Equal(t, SackBitmap{0b101}, s.sack, "6 = 5+1+0 is bit 0, 8 is bit 2")
}

func TestScoreboardRunAcrossWordBoundaries(t *testing.T) {
	// PSNs 1..64 (word 0 full) and 66..200 arrive, 65 is missing.
	var s rxScoreboard
	for psn := PSN(1); psn <= 200; psn++ {
		if psn != 65 {
			s.mark(psn)
		}
	}
	require.Equal(t, ^uint64(0), s.sack[0], "PSNs 1..64")
	require.Equal(t, ^uint64(1), s.sack[1], "PSN 65 (bit 64) missing, 66..128 present")
	require.Equal(t, ^uint64(0), s.sack[2])
	require.Equal(t, uint64(0xFF), s.sack[3], "PSNs 193..200 = bits 192..199")
	require.Equal(t, 199, s.sack.Highest())

	s.mark(0) // run over exactly one full word, stopping at bit 64
	require.Equal(t, PSN(65), s.cum)
	require.Equal(t, 200-66, s.sack.Highest(), "PSN 200 = cum+1+134")
	for i := 0; i <= 200-66; i++ {
		require.True(t, s.sack.Has(i), "bit %d", i)
	}
	require.False(t, s.sack.Has(200-65))

	s.mark(65) // run over 135 bits spanning three words
	require.Equal(t, PSN(201), s.cum)
	require.Equal(t, SackBitmap{}, s.sack)
	require.Equal(t, -1, s.sack.Highest())
}

func TestScoreboardFullWindow(t *testing.T) {
	// Every PSN of the window but cum arrives: the run is all 256 bits.
	var s rxScoreboard
	s.cum = 5000
	for psn := PSN(5001); psn <= 5256; psn++ {
		require.Equal(t, psnNew, s.classify(psn))
		s.mark(psn)
	}
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}, s.sack)
	require.Equal(t, psnBeyond, s.classify(5257))
	s.mark(5000)
	require.Equal(t, PSN(5257), s.cum)
	require.Equal(t, SackBitmap{}, s.sack)
	require.Equal(t, psnNew, s.classify(5257))
	require.Equal(t, psnNew, s.classify(5257+256))
	require.Equal(t, psnBeyond, s.classify(5257+257))
}

func TestScoreboardWrapAround(t *testing.T) {
	var s rxScoreboard
	s.cum = 0xFFFFFFF0
	// cum+256 and cum+257 lie across the wrap, at 0xF0 and 0xF1.
	require.Equal(t, psnNew, s.classify(0x000000F0))
	require.Equal(t, psnBeyond, s.classify(0x000000F1))
	require.Equal(t, psnDuplicate, s.classify(0xFFFFFFEF))

	s.mark(0xFFFFFFF5) // bit 4
	s.mark(0x00000003) // 0x13 above cum: bit 18
	s.mark(0x000000F0) // 256 above cum: bit 255
	require.Equal(t, SackBitmap{1<<4 | 1<<18, 0, 0, 1 << 63}, s.sack)
	require.Equal(t, psnDuplicate, s.classify(0x00000003))
	require.Equal(t, psnNew, s.classify(0x00000002))
	require.Equal(t, psnNew, s.classify(0))

	// Everything from cum up to 0x10 arrives in order: cum crosses 2^32.
	for psn := PSN(0xFFFFFFF0); psn != 0x11; psn++ {
		if s.classify(psn) == psnNew {
			s.mark(psn)
		}
	}
	require.Equal(t, PSN(0x11), s.cum)
	// Only 0xF0 is left, now 0xF0-0x11-1 = 222 bits above.
	require.Equal(t, 0xF0-0x11-1, s.sack.Highest())
	require.True(t, s.sack.Has(0xF0-0x11-1))
	require.Equal(t, psnDuplicate, s.classify(0xFFFFFFF5))
	require.Equal(t, psnDuplicate, s.classify(0x00000003))
	require.Equal(t, psnDuplicate, s.classify(0xF0))
	require.Equal(t, psnNew, s.classify(0x11+256))
	require.Equal(t, psnBeyond, s.classify(0x11+257))
}

func TestScoreboardReset(t *testing.T) {
	var s rxScoreboard
	s.cum = 77
	s.mark(80)
	s.reset()
	require.Equal(t, rxScoreboard{}, s)
	require.Equal(t, psnNew, s.classify(0))
}

// shiftRef is the bit-by-bit definition of shiftDown.
func shiftRef(b SackBitmap, n uint) SackBitmap {
	var out SackBitmap
	for i := 0; i < SackBits; i++ {
		src := uint(i) + n
		if src < SackBits && b.Has(int(src)) {
			out[i/64] |= 1 << (i % 64)
		}
	}
	return out
}

func TestSackShiftDown(t *testing.T) {
	ones := SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	patterns := []SackBitmap{
		{},
		ones,
		{1, 0, 0, 0},
		{0, 0, 0, 1 << 63},
		{0x8000000000000001, 0x8000000000000001, 0x8000000000000001, 0x8000000000000001},
		{0x0123456789ABCDEF, 0xFEDCBA9876543210, 0xDEADBEEFCAFEF00D, 0x0F1E2D3C4B5A6978},
	}
	for _, n := range []uint{0, 1, 63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 300, 1 << 20} {
		for _, p := range patterns {
			got := p
			got.shiftDown(n)
			require.Equal(t, shiftRef(p, n), got, "pattern %x shifted by %d", p, n)
		}
	}

	// The same, as explicit numbers.
	shift := func(b SackBitmap, n uint) SackBitmap { b.shiftDown(n); return b }
	require.Equal(t, ones, shift(ones, 0))
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0) >> 1}, shift(ones, 1))
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), 1}, shift(ones, 63))
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0), 0}, shift(ones, 64))
	require.Equal(t, SackBitmap{^uint64(0), ^uint64(0), ^uint64(0) >> 1, 0}, shift(ones, 65))
	require.Equal(t, SackBitmap{1, 0, 0, 0}, shift(ones, 255))
	require.Equal(t, SackBitmap{}, shift(ones, 256))
	require.Equal(t, SackBitmap{}, shift(ones, 300))

	top := SackBitmap{0, 0, 0, 1 << 63} // bit 255
	require.Equal(t, SackBitmap{0, 0, 0, 1 << 62}, shift(top, 1))
	require.Equal(t, SackBitmap{0, 0, 0, 1}, shift(top, 63))
	require.Equal(t, SackBitmap{0, 0, 1 << 63, 0}, shift(top, 64))
	require.Equal(t, SackBitmap{0, 0, 1 << 62, 0}, shift(top, 65))
	require.Equal(t, SackBitmap{1, 0, 0, 0}, shift(top, 255))
	require.Equal(t, SackBitmap{}, shift(top, 256))

	bit64 := SackBitmap{0, 1, 0, 0}
	require.Equal(t, SackBitmap{1 << 63, 0, 0, 0}, shift(bit64, 1))
	require.Equal(t, SackBitmap{1, 0, 0, 0}, shift(bit64, 64))
	require.Equal(t, SackBitmap{}, shift(bit64, 65))
	require.Equal(t, SackBitmap{}, shift(SackBitmap{1, 0, 0, 0}, 1))
}

func TestSackHighestAndHas(t *testing.T) {
	var b SackBitmap
	require.Equal(t, -1, b.Highest())
	for _, i := range []int{0, 1, 63, 64, 65, 127, 128, 191, 192, 255} {
		var b SackBitmap
		b[i/64] |= 1 << (i % 64)
		require.Equal(t, i, b.Highest(), "bit %d", i)
		require.True(t, b.Has(i))
		if i > 0 {
			require.False(t, b.Has(i-1))
			b[0] |= 1 // a lower bit does not change the highest
			require.Equal(t, i, b.Highest())
		}
	}
	b = SackBitmap{0xFF, 1 << 40, 0, 0}
	require.Equal(t, 64+40, b.Highest())
}

// TestScoreboardMatchesModel checks the scoreboard against a plain set of
// received PSNs over random arrival orders, duplicates and PSNs beyond the
// window, starting near the 2^32 wrap.
func TestScoreboardMatchesModel(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		start := PSN(0xFFFFFF00 + r.Uint32N(0x200))
		s := rxScoreboard{cum: start}
		got := map[PSN]bool{}
		cum := start
		for k := 0; k < 1500; k++ {
			psn := cum + PSN(r.IntN(300)) - PSN(r.IntN(20))
			d := int64(int32(psn - cum))
			c := s.classify(psn)
			switch {
			case d < 0 || got[psn]:
				require.Equal(t, psnDuplicate, c, "seed %d psn %#x cum %#x", seed, psn, cum)
				continue
			case d > SackBits:
				require.Equal(t, psnBeyond, c, "seed %d psn %#x cum %#x", seed, psn, cum)
				continue
			}
			require.Equal(t, psnNew, c, "seed %d psn %#x cum %#x", seed, psn, cum)
			s.mark(psn)
			got[psn] = true
			for got[cum] {
				delete(got, cum)
				cum++
			}
			require.Equal(t, cum, s.cum, "seed %d", seed)
			var want SackBitmap
			for p := range got {
				i := int(int32(p - cum - 1))
				require.True(t, i >= 0 && i < SackBits)
				want[i/64] |= 1 << (i % 64)
			}
			require.Equal(t, want, s.sack, "seed %d", seed)
		}
	}
}
