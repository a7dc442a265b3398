//go:build !amd64

package crc32c

// Elsewhere hash/crc32 does the work (ARMv8 has CRC32C instructions, which
// it uses).
var (
	fold    func(crc uint32, p []byte) uint32
	foldMin = 1 << 62
	foldMax = 1 << 62
	impl    = "hash/crc32"

	copyFold func(crc uint32, first, dst, src []byte) uint32
)
