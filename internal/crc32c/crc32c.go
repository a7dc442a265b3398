package crc32c

import "hash/crc32"

// table is hash/crc32's Castagnoli table: its Update uses the SSE4.2 or
// ARMv8 CRC instructions where the CPU has them, and is the fallback and
// the reference of this package.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of p (initial value and final XOR
// 0xFFFFFFFF, reflected), equal to crc32.Checksum(p, castagnoliTable).
func Checksum(p []byte) uint32 { return Update(0, p) }

// Update returns the CRC-32C of the bytes that gave crc followed by p,
// like crc32.Update with the Castagnoli table.
func Update(crc uint32, p []byte) uint32 {
	if len(p) >= foldMin && len(p) < foldMax {
		return ^fold(^crc, p)
	}
	return crc32.Update(crc, table, p)
}

// CopyUpdate copies src to buf[n:], as copy does, and returns the CRC of
// the bytes that gave crc followed by buf[:n+len(src)]: Update after the
// copy, but with AVX-512 src is read once, each block stored as it is
// folded, where copy and then Update read it twice (a packet's payload,
// taken from a registered region and often cold in the cache, copied
// behind headers already in buf). buf[n:] must hold len(src) bytes and
// must not overlap src.
func CopyUpdate(crc uint32, buf []byte, n int, src []byte) uint32 {
	if len(buf)-n < len(src) {
		panic("crc32c: CopyUpdate past the end of buf")
	}
	// The fold's first block is buf's: the headers and enough of src,
	// copied first, to fill it; the rest of src streams. Without a fused
	// pass, or without a whole first block, copy and then Update.
	if copyFold == nil || n > copyFoldFirst || n+len(src) < copyFoldFirst {
		return Update(crc, buf[:n+copy(buf[n:], src)])
	}
	h := copy(buf[n:copyFoldFirst], src)
	return ^copyFold(^crc, buf[:copyFoldFirst], buf[copyFoldFirst:], src[h:])
}

// copyFoldFirst is the fused pass's first block, which it folds without
// copying (one round of the AVX-512 main loop); it is also the fewest
// bytes, headers and payload together, the pass takes.
const copyFoldFirst = 256

// Impl names the implementation Update uses for inputs in FoldRange
// ("avx512", "sse", or "hash/crc32"), for benchmarks and reports.
func Impl() string { return impl }

// FoldRange is the window of input lengths [min, max) Update folds with
// carry-less multiplies; the others go to hash/crc32 (the CRC32
// instruction), which measured faster there.
func FoldRange() (min, max int) { return foldMin, foldMax }
