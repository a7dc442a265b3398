package metaroce

import (
	"encoding/binary"
	"hash/crc32"
)

// castagnoli is the CRC32C table; hash/crc32 uses the SSE4.2/ARMv8 CRC
// instructions for it where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SealCRC computes the CRC32C of pkt[:n] and writes it into pkt[n:n+4],
// returning the sealed packet length n+CRCLen. pkt must have room.
func SealCRC(pkt []byte, n int) int {
	c := crc32.Checksum(pkt[:n], castagnoli)
	binary.BigEndian.PutUint32(pkt[n:], c)
	return n + CRCLen
}

// CheckCRC verifies the CRC32C trailer of a whole packet and returns the
// packet without its trailer.
func CheckCRC(pkt []byte) ([]byte, error) {
	if len(pkt) < HeaderLen+CRCLen {
		return nil, ErrShort
	}
	n := len(pkt) - CRCLen
	if crc32.Checksum(pkt[:n], castagnoli) != binary.BigEndian.Uint32(pkt[n:]) {
		return nil, ErrCRC
	}
	return pkt[:n], nil
}
