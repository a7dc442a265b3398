package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// AckPrefixLen is the size of the ACK extension's fixed part.
const AckPrefixLen = 4

// AckBlockLen is the size of a full per-path ACK block, the one that carries
// a SACK bitmap.
const AckBlockLen = 56

// AckBlockCompactLen is the size of a block without its SACK bitmap
// (AckBlockNoSack): the bitmap is all zero, nothing received above the
// cumulative point, which is what almost every ACK of a path without loss
// says. Leaving the 32 zero bytes out more than halves what acknowledging
// costs the reverse direction.
const AckBlockCompactLen = AckBlockLen - 8*sackWords

// AckBlockNoSack is the block flag saying the SACK bitmap is absent (all
// zero). It is the only flag defined; the others MUST be 0.
const AckBlockNoSack = 0x01

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
//	 0   1  flags      AckBlockNoSack: the sack field is absent (all zero)
//	 1   1  path_id    0..255 (MaxPaths = 256)
//	 2   2  path_gen
//	 4   4  cum        next PSN expected: every PSN before it was received
//	 8  32  sack       4 x uint64; bit i set = PSN cum+1+i received
//	                   (absent with AckBlockNoSack: the fields below move up 32)
//	40   4  ecn_ce     CE-marked packets received on the path (mod 2^32)
//	44   4  rate_hint  receiver's fair-share rate for this sender, Mbit/s (0 = none)
//	48   8  ts_echo    timestamp of the newest packet that triggered this ACK
//
// A block is AckBlockLen bytes with its bitmap, AckBlockCompactLen without.
// Encoders leave an all-zero bitmap out; decoders accept it either way. (A
// full block's first two bytes are those of a 16-bit path_id below 256,
// which is how version 1 first wrote them.)
type AckBlock struct {
	Path     verbs.PathID
	PathGen  uint16
	Cum      PSN
	Sack     SackBitmap
	ECNCount uint32
	RateHint uint32
	TSEcho   verbs.Time
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
// many well-formed blocks, so that a receiver acts on none of an ACK it
// would reject: ErrField for a reserved byte or block flag that is not 0,
// ErrLength when the blocks do not fill body exactly.
func DecodeAckPrefix(body []byte) (int, error) {
	if len(body) < AckPrefixLen {
		return 0, ErrShort
	}
	if body[1]|body[2]|body[3] != 0 {
		return 0, ErrField
	}
	n := int(body[0])
	o := AckPrefixLen
	for i := 0; i < n; i++ {
		if o >= len(body) {
			return 0, ErrLength
		}
		l, err := ackBlockLen(body[o])
		if err != nil {
			return 0, err
		}
		o += l
	}
	if o != len(body) {
		return 0, ErrLength
	}
	return n, nil
}

// Len is the size of a's encoding: AckBlockCompactLen when its bitmap is
// all zero, AckBlockLen otherwise.
func (a *AckBlock) Len() int {
	if a.Sack == (SackBitmap{}) {
		return AckBlockCompactLen
	}
	return AckBlockLen
}

// Put writes a into b[:a.Len()] and returns a.Len(). a.Path must be below
// 256 (a connection has at most MaxPaths paths).
func (a *AckBlock) Put(b []byte) int {
	n := a.Len()
	_ = b[n-1]
	b[1] = byte(a.Path)
	binary.BigEndian.PutUint16(b[2:], a.PathGen)
	binary.BigEndian.PutUint32(b[4:], uint32(a.Cum))
	o := 8
	if n == AckBlockCompactLen {
		b[0] = AckBlockNoSack
	} else {
		b[0] = 0
		for i := 0; i < sackWords; i++ {
			binary.BigEndian.PutUint64(b[o+8*i:], a.Sack[i])
		}
		o += 8 * sackWords
	}
	binary.BigEndian.PutUint32(b[o:], a.ECNCount)
	binary.BigEndian.PutUint32(b[o+4:], a.RateHint)
	binary.BigEndian.PutUint64(b[o+8:], uint64(a.TSEcho))
	return n
}

// ackBlockLen returns the length of the block that starts b (b[0], its
// flags, must be there): ErrField for an undefined flag.
func ackBlockLen(flags byte) (int, error) {
	switch flags {
	case 0:
		return AckBlockLen, nil
	case AckBlockNoSack:
		return AckBlockCompactLen, nil
	}
	return 0, ErrField
}

// Decode parses the ACK block at the start of b and returns its length.
func (a *AckBlock) Decode(b []byte) (int, error) {
	if len(b) < 1 {
		return 0, ErrShort
	}
	n, err := ackBlockLen(b[0])
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, ErrShort
	}
	a.Path = verbs.PathID(b[1])
	a.PathGen = binary.BigEndian.Uint16(b[2:])
	a.Cum = PSN(binary.BigEndian.Uint32(b[4:]))
	o := 8
	if n == AckBlockCompactLen {
		a.Sack = SackBitmap{}
	} else {
		for i := 0; i < sackWords; i++ {
			a.Sack[i] = binary.BigEndian.Uint64(b[o+8*i:])
		}
		o += 8 * sackWords
	}
	a.ECNCount = binary.BigEndian.Uint32(b[o:])
	a.RateHint = binary.BigEndian.Uint32(b[o+4:])
	a.TSEcho = verbs.Time(binary.BigEndian.Uint64(b[o+8:]))
	return n, nil
}
