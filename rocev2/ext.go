package rocev2

import (
	"encoding/binary"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Extension header sizes (IBA 9.3).
const (
	RETHLen = 16 // RDMA extended transport header
	AETHLen = 4  // ACK extended transport header
	ImmLen  = 4  // immediate data
	DETHLen = 8  // datagram extended transport header
	ICRCLen = 4  // invariant CRC trailer
	// CNPPayloadLen is the reserved, zero-filled body of a CNP (Annex A17.9.3).
	CNPPayloadLen = 16
)

// RETH is the RDMA Extended Transport Header (IBA 9.3.3): on the first or
// only packet of an RDMA WRITE and on an RDMA READ request.
type RETH struct {
	VA     uint64 // virtual address of the first byte at the responder
	RKey   uint32
	DMALen uint32 // length of the whole WRITE or READ
}

// Put writes r into b[:RETHLen].
func (r *RETH) Put(b []byte) {
	binary.BigEndian.PutUint64(b, r.VA)
	binary.BigEndian.PutUint32(b[8:], r.RKey)
	binary.BigEndian.PutUint32(b[12:], r.DMALen)
}

// Decode reads a RETH from b.
func (r *RETH) Decode(b []byte) error {
	if len(b) < RETHLen {
		return ErrShort
	}
	*r = RETH{VA: binary.BigEndian.Uint64(b), RKey: binary.BigEndian.Uint32(b[8:]), DMALen: binary.BigEndian.Uint32(b[12:])}
	return nil
}

// Syndrome is the AETH syndrome byte (IBA 9.3.5, Table 41): bits 6..5 say
// ACK (00), RNR NAK (01) or NAK (11); the low five bits are the credit
// count, the RNR timer code or the NAK code. Bit 7 is reserved (0).
type Syndrome uint8

// Syndromes and codes.
const (
	// SynACK with the credit field set to "invalid" (0x1F): this
	// implementation does not use end-to-end credits and relies on RNR NAKs.
	SynACK Syndrome = 0x1F
	// SynRNR is the RNR NAK prefix; the low five bits carry the timer code.
	SynRNR Syndrome = 0x20
	// NAK codes (prefix 0x60).
	SynNAKSequence      Syndrome = 0x60 // PSN sequence error: carries the expected PSN
	SynNAKInvalidReq    Syndrome = 0x61 // invalid request
	SynNAKRemoteAccess  Syndrome = 0x62 // remote access error (rkey, bounds, access)
	SynNAKRemoteOpError Syndrome = 0x63 // remote operational error
)

// SyndromeKind is what an AETH says.
type SyndromeKind uint8

const (
	KindACK SyndromeKind = iota
	KindRNR
	KindNAK
	kindReserved
)

// Kind classifies s.
func (s Syndrome) Kind() SyndromeKind {
	switch s >> 5 & 3 {
	case 0:
		return KindACK
	case 1:
		return KindRNR
	case 3:
		return KindNAK
	}
	return kindReserved
}

// Value is the low five bits: credits, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// AETH is the ACK Extended Transport Header (IBA 9.3.5).
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // 24-bit message sequence number of the responder
}

// Put writes a into b[:AETHLen].
func (a *AETH) Put(b []byte) {
	binary.BigEndian.PutUint32(b, a.MSN&PSNMask)
	b[0] = byte(a.Syndrome)
}

// Decode reads an AETH. Reserved syndromes (bit 7 set, kind 10, NAK codes
// above 4) are refused.
func (a *AETH) Decode(b []byte) error {
	if len(b) < AETHLen {
		return ErrShort
	}
	s := Syndrome(b[0])
	if s&0x80 != 0 || s.Kind() == kindReserved || (s.Kind() == KindNAK && s.Value() > 4) {
		return ErrField
	}
	*a = AETH{Syndrome: s, MSN: binary.BigEndian.Uint32(b) & PSNMask}
	return nil
}

// DETH is the Datagram Extended Transport Header (IBA 9.3.2), carried by the
// UD packets of connection management.
type DETH struct {
	QKey  uint32
	SrcQP uint32
}

// Put writes d into b[:DETHLen].
func (d *DETH) Put(b []byte) {
	binary.BigEndian.PutUint32(b, d.QKey)
	binary.BigEndian.PutUint32(b[4:], d.SrcQP&PSNMask)
}

// Decode reads a DETH.
func (d *DETH) Decode(b []byte) error {
	if len(b) < DETHLen {
		return ErrShort
	}
	*d = DETH{QKey: binary.BigEndian.Uint32(b), SrcQP: binary.BigEndian.Uint32(b[4:]) & PSNMask}
	return nil
}

// RNRTimer returns the time an RNR NAK timer code (0..31) stands for
// (IBA Table 45; the table lives in verbs, shared with metaroce).
func RNRTimer(code uint8) time.Duration { return verbs.RNRTimer(code) }

// AckTimeout returns the local ACK timeout of an IB timeout code:
// 4.096 µs * 2^code (IBA 9.7.6.1.3). Code 0 means "infinite" and returns 0.
func AckTimeout(code uint8) time.Duration { return verbs.AckTimeout(code) }
