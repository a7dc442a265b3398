package metaroce

import "encoding/binary"

// AckPrefixLen is the size of the ACK extension's fixed part.
const AckPrefixLen = 4

// AckBlockLen is the size of one per-path ACK block.
const AckBlockLen = 56

// SackBits is the width of the selective-acknowledgement bitmap: 256 bits,
// one per PSN above the cumulative point.
const SackBits = 256

// sackWords is the number of 64-bit words in a SACK bitmap.
const sackWords = SackBits / 64

// SackBitmap is a 256-bit bitmap. Bit i (word i/64, bit i%64 counting from
// the least significant) stands for PSN cum+1+i.
type SackBitmap [sackWords]uint64

// AckBlock acknowledges one path. An ACK packet is
//
//	Header | count (1) | reserved (3) | count x AckBlock
//
// and each block is
//
//	off len field
//	 0   2  path_id
//	 2   2  path_gen
//	 4   4  cum        next PSN expected: every PSN before it was received
//	 8  32  sack       4 x uint64; bit i set = PSN cum+1+i received
//	40   4  ecn_ce     CE-marked packets received on the path (mod 2^32)
//	44   4  rate_hint  receiver's fair-share rate for this sender, Mbit/s (0 = none)
//	48   8  ts_echo    timestamp of the newest packet that triggered this ACK
type AckBlock struct {
	Path     PathID
	PathGen  uint16
	Cum      PSN
	Sack     SackBitmap
	ECNCount uint32
	RateHint uint32
	TSEcho   Time
}

// MaxAckBlocks is the most blocks one ACK may carry (bounded by the count
// byte).
const MaxAckBlocks = 255

// PutAckPrefix writes the ACK extension prefix for count blocks.
func PutAckPrefix(b []byte, count int) {
	_ = b[AckPrefixLen-1]
	b[0] = byte(count)
	b[1], b[2], b[3] = 0, 0, 0
}

// DecodeAckPrefix returns the block count of an ACK extension and checks
// that body (the bytes after the header, without CRC) holds exactly that
// many blocks.
func DecodeAckPrefix(body []byte) (int, error) {
	if len(body) < AckPrefixLen {
		return 0, ErrShort
	}
	if body[1]|body[2]|body[3] != 0 {
		return 0, ErrField
	}
	n := int(body[0])
	if len(body) != AckPrefixLen+n*AckBlockLen {
		return 0, ErrLength
	}
	return n, nil
}

// Put writes a into b[:AckBlockLen].
func (a *AckBlock) Put(b []byte) {
	_ = b[AckBlockLen-1]
	binary.BigEndian.PutUint16(b[0:], uint16(a.Path))
	binary.BigEndian.PutUint16(b[2:], a.PathGen)
	binary.BigEndian.PutUint32(b[4:], uint32(a.Cum))
	for i := 0; i < sackWords; i++ {
		binary.BigEndian.PutUint64(b[8+8*i:], a.Sack[i])
	}
	binary.BigEndian.PutUint32(b[40:], a.ECNCount)
	binary.BigEndian.PutUint32(b[44:], a.RateHint)
	binary.BigEndian.PutUint64(b[48:], uint64(a.TSEcho))
}

// Decode parses one ACK block from b.
func (a *AckBlock) Decode(b []byte) error {
	if len(b) < AckBlockLen {
		return ErrShort
	}
	a.Path = PathID(binary.BigEndian.Uint16(b[0:]))
	a.PathGen = binary.BigEndian.Uint16(b[2:])
	a.Cum = PSN(binary.BigEndian.Uint32(b[4:]))
	for i := 0; i < sackWords; i++ {
		a.Sack[i] = binary.BigEndian.Uint64(b[8+8*i:])
	}
	a.ECNCount = binary.BigEndian.Uint32(b[40:])
	a.RateHint = binary.BigEndian.Uint32(b[44:])
	a.TSEcho = Time(binary.BigEndian.Uint64(b[48:]))
	return nil
}
