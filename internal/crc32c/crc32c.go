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

// Impl names the implementation Update uses for inputs in FoldRange
// ("avx512", "sse", or "hash/crc32"), for benchmarks and reports.
func Impl() string { return impl }

// FoldRange is the window of input lengths [min, max) Update folds with
// carry-less multiplies; the others go to hash/crc32 (the CRC32
// instruction), which measured faster there.
func FoldRange() (min, max int) { return foldMin, foldMax }
