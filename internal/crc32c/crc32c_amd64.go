package crc32c

// The folding constants. Lane bits are reflected: bit j of a 128-bit lane
// loaded from memory is the coefficient of x^(127-j) of that 16-byte
// block, so its low quadword holds the high-degree half. PCLMULQDQ of two
// reflected 64-bit values gives the reflected product times x, hence the
// -1 in the exponents: folding a lane D bits forward multiplies its low
// half by x^(D+64) and its high half by x^D, which the pair
// (x^(D+63) mod P, x^(D-1) mod P) does.
//
// foldK is read by the assembly: each pair is {low-half key, high-half
// key} for one distance.
var foldK [6]uint64

const (
	k512  = 0 // 4 SSE lanes apart, or one 64-byte ZMM register apart
	k128  = 2 // one lane apart
	k2048 = 4 // 4 ZMM registers apart (the AVX-512 main loop)
)

// poly is the Castagnoli polynomial without its x^32 term, bit i the
// coefficient of x^i.
const poly = 0x1EDC6F41

// xPowModP returns x^n mod P, bit i the coefficient of x^i.
func xPowModP(n int) uint32 {
	r := uint64(1)
	for range n {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | poly
		}
	}
	return uint32(r)
}

// reflect64 places the coefficient of x^i of r at bit 63-i, the layout a
// 64-bit reflected operand of PCLMULQDQ has.
func reflect64(r uint32) uint64 {
	var k uint64
	for i := range 32 {
		if r&(1<<i) != 0 {
			k |= 1 << (63 - i)
		}
	}
	return k
}

func setKeys(at, distance int) {
	foldK[at] = reflect64(xPowModP(distance + 63))
	foldK[at+1] = reflect64(xPowModP(distance - 1))
}

// cpuid and xgetbv are in cpu_amd64.s.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

// foldSSE needs len(p) >= 64; it returns the raw (not inverted) CRC
// register after p for the raw register crc. foldAVX512 needs the AVX-512
// features below and hands inputs under 256 bytes to foldSSE.
//
//go:noescape
func foldSSE(crc uint32, p []byte) uint32

//go:noescape
func foldAVX512(crc uint32, p []byte) uint32

// copyFoldAVX512 is foldAVX512 over first (copyFoldFirst bytes) and then
// src that also stores src to dst (copyfold_amd64.s): len(dst) >= len(src).
//
//go:noescape
func copyFoldAVX512(crc uint32, first, dst, src []byte) uint32

var (
	fold    func(crc uint32, p []byte) uint32
	foldMin = 1 << 62
	foldMax = 1 << 62
	impl    = "hash/crc32"

	// copyFold folds and copies in one pass (CopyUpdate); nil where the
	// CPU has no AVX-512, and there CopyUpdate is copy then Update.
	copyFold func(crc uint32, first, dst, src []byte) uint32

	hasSSE, hasAVX512 bool
)

// The windows come from BenchmarkUpdate on an AMD EPYC (Zen 5), Go 1.26,
// in one run: under 64 bytes the CRC32 instruction chain of hash/crc32
// wins (its fixed cost is lower); from 64 bytes on the AVX-512 fold is as
// fast or faster (about 2x at 1 and 4 KiB). The 4-lane SSE fold, bound by
// the multiplier's throughput, matches hash/crc32's 3-way CRC32 chain at
// 256 bytes and reaches only half of it at 4 KiB, so without AVX-512 it is
// used below 256 bytes only.
const (
	foldMinSize   = 64
	sseFoldMaxLen = 256
)

func init() {
	setKeys(k512, 512)
	setKeys(k128, 128)
	setKeys(k2048, 2048)

	maxLeaf, _, _, _ := cpuid(0, 0)
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		sse41   = 1 << 19
		sse42   = 1 << 20
		pclmul  = 1 << 1
		osxsave = 1 << 27
	)
	hasSSE = ecx1&(sse41|sse42|pclmul) == sse41|sse42|pclmul
	if hasSSE && ecx1&osxsave != 0 && maxLeaf >= 7 {
		_, ebx7, ecx7, _ := cpuid(7, 0)
		xcr0, _ := xgetbv()
		const (
			avx512f  = 1 << 16 // leaf 7 EBX
			vpclmul  = 1 << 10 // leaf 7 ECX
			zmmState = 0xe6    // XCR0: SSE, AVX, opmask, ZMM0-15 upper halves, ZMM16-31
		)
		hasAVX512 = ebx7&avx512f != 0 && ecx7&vpclmul != 0 && xcr0&zmmState == zmmState
	}
	switch {
	case hasAVX512:
		fold, foldMin, impl = foldAVX512, foldMinSize, "avx512"
		copyFold = copyFoldAVX512
	case hasSSE:
		fold, foldMin, foldMax, impl = foldSSE, foldMinSize, sseFoldMaxLen, "sse"
	}
}
