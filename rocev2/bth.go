package rocev2

import (
	"encoding/binary"
	"errors"
)

// BTHLen is the size of the Base Transport Header.
const BTHLen = 12

// UDPPort is the IANA-assigned RoCEv2 UDP destination port.
const UDPPort = 4791

// DefaultPKey is the default partition key (full membership, default
// partition), the value RoCEv2 NICs send.
const DefaultPKey = 0xFFFF

// BTH is the Base Transport Header (IBA 9.2):
//
//	byte 0     OpCode
//	byte 1     SE(1) M(1) PadCnt(2) TVer(4)
//	bytes 2-3  P_Key
//	byte 4     FECN(1) BECN(1) Resv6(6)   (RoCEv2: "resv8a", masked in the ICRC)
//	bytes 5-7  DestQP
//	byte 8     AckReq(1) Resv7(7)
//	bytes 9-11 PSN
//
// In RoCEv2 congestion is signalled by IP ECN and CNPs; FECN is not used
// and BECN is set only in CNPs (Annex A17.9.3). Reserved bits are sent as
// zero and ignored on receipt, as the IBA requires.
type BTH struct {
	Opcode   Opcode
	SE       bool // solicited event
	M        bool // MigReq
	PadCount uint8
	TVer     uint8
	PKey     uint16
	FECN     bool
	BECN     bool
	DestQP   uint32
	AckReq   bool
	PSN      PSN
}

// Errors of the decoders.
var (
	ErrShort    = errors.New("rocev2: packet too short")
	ErrOpcode   = errors.New("rocev2: unsupported opcode")
	ErrVersion  = errors.New("rocev2: unsupported transport header version")
	ErrLength   = errors.New("rocev2: length does not match the opcode")
	ErrPad      = errors.New("rocev2: pad count not allowed here")
	ErrICRC     = errors.New("rocev2: ICRC mismatch")
	ErrField    = errors.New("rocev2: field value out of range")
	ErrBufSmall = errors.New("rocev2: buffer too small")
)

// Put writes h into b[:BTHLen]. Fields wider than their wire width are
// truncated (DestQP and PSN to 24 bits, PadCount to 2, TVer to 4).
func (h *BTH) Put(b []byte) {
	_ = b[BTHLen-1]
	b[0] = byte(h.Opcode)
	b[1] = bit(h.SE, 7) | bit(h.M, 6) | (h.PadCount&3)<<4 | h.TVer&0xF
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	binary.BigEndian.PutUint32(b[4:], h.DestQP&PSNMask)
	b[4] = bit(h.FECN, 7) | bit(h.BECN, 6)
	binary.BigEndian.PutUint32(b[8:], uint32(h.PSN)&PSNMask)
	b[8] = bit(h.AckReq, 7)
}

// Decode reads a BTH from b. It accepts only opcodes this implementation
// knows and transport version 0; reserved bits are ignored.
func (h *BTH) Decode(b []byte) error {
	if len(b) < BTHLen {
		return ErrShort
	}
	op := Opcode(b[0])
	if !op.Valid() {
		return ErrOpcode
	}
	if b[1]&0xF != 0 {
		return ErrVersion
	}
	// Field by field: a BTH (eleven fields, too many for registers)
	// assigned from a composite literal is built on the stack and copied
	// with wide loads that stall on its narrow stores, once per packet.
	h.Opcode, h.SE, h.M, h.PadCount, h.TVer = op, b[1]&0x80 != 0, b[1]&0x40 != 0, b[1]>>4&3, 0
	h.PKey, h.FECN, h.BECN = binary.BigEndian.Uint16(b[2:]), b[4]&0x80 != 0, b[4]&0x40 != 0
	h.DestQP, h.AckReq = binary.BigEndian.Uint32(b[4:])&PSNMask, b[8]&0x80 != 0
	h.PSN = PSN(binary.BigEndian.Uint32(b[8:]) & PSNMask)
	return nil
}

func bit(v bool, n uint) byte {
	if v {
		return 1 << n
	}
	return 0
}
