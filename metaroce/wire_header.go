package metaroce

import (
	"encoding/binary"
	"errors"

	"github.com/metaroce/metaroce/verbs"
)

// Wire format, version 2. docs/protocol.md is the normative description;
// this file and the other wire_*.go files implement it. Every multi-byte
// field is big-endian (network order). A packet is
//
//	Header (32 bytes) | extension (by opcode) | payload | CRC32C (4 bytes)
//
// and travels as the payload of one UDP datagram to DefaultUDPPort.

// WireVersion is the protocol version this implementation speaks. Version
// 1 (a 40-byte message extension in every data packet) is refused like any
// other version: dropped, counted (ErrVersion), never answered.
const WireVersion = 2

// DefaultUDPPort is the UDP destination port of MetaRoCE-style packets. It is
// neither 4791 (RoCEv2) nor 4793 (Ultra Ethernet Transport), so Wireshark
// and NICs do not mistake our packets for either.
const DefaultUDPPort = 4794

// HeaderLen is the size of the common header.
const HeaderLen = 32

// CRCLen is the size of the CRC32C trailer.
const CRCLen = 4

// Opcode says what a packet is and which extension follows the header.
type Opcode uint8

// Opcodes. Sequenced opcodes (data, READ requests and NOPs) carry a PSN in
// their path's sequence space and are acknowledged and repaired; the others
// are unsequenced control packets.
const (
	OpWrite        Opcode = 0x01 // RDMA WRITE data
	OpWriteImm     Opcode = 0x02 // RDMA WRITE with immediate (consumes a receive)
	OpSend         Opcode = 0x03 // SEND data
	OpSendImm      Opcode = 0x04 // SEND with immediate
	OpReadReq      Opcode = 0x05 // RDMA READ request
	OpReadResp     Opcode = 0x06 // RDMA READ response data
	OpNop          Opcode = 0x07 // sequenced no-op: tail probe, tombstone for a refused packet
	OpAck          Opcode = 0x10 // per-path cumulative point + 256-bit SACK blocks
	OpNak          Opcode = 0x11 // a sequenced packet was refused (access, length, receiver not ready)
	OpConnect      Opcode = 0x20 // connection request
	OpAccept       Opcode = 0x21 // connection accepted
	OpClose        Opcode = 0x22 // orderly close
	OpCloseAck     Opcode = 0x23 // close acknowledged
	OpKeepalive    Opcode = 0x24 // liveness probe; answered with an ACK
	OpReset        Opcode = 0x25 // "I have no such connection": the peer tears down
	opcodeMaxValid Opcode = OpReset
)

// Sequenced reports whether packets of this opcode occupy a PSN.
func (o Opcode) Sequenced() bool { return o >= OpWrite && o <= OpNop }

// CarriesMsg reports whether the opcode carries a MsgHeader extension.
func (o Opcode) CarriesMsg() bool { return o >= OpWrite && o <= OpReadResp }

// headerOnly reports whether packets of this opcode are the header alone.
func (o Opcode) headerOnly() bool {
	switch o {
	case OpNop, OpClose, OpCloseAck, OpKeepalive, OpReset:
		return true
	}
	return false
}

// CarriesPayload reports whether the opcode carries message payload.
func (o Opcode) CarriesPayload() bool { return o.CarriesMsg() && o != OpReadReq }

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "WRITE"
	case OpWriteImm:
		return "WRITE_IMM"
	case OpSend:
		return "SEND"
	case OpSendImm:
		return "SEND_IMM"
	case OpReadReq:
		return "READ_REQ"
	case OpReadResp:
		return "READ_RESP"
	case OpNop:
		return "NOP"
	case OpAck:
		return "ACK"
	case OpNak:
		return "NAK"
	case OpConnect:
		return "CONNECT"
	case OpAccept:
		return "ACCEPT"
	case OpClose:
		return "CLOSE"
	case OpCloseAck:
		return "CLOSE_ACK"
	case OpKeepalive:
		return "KEEPALIVE"
	case OpReset:
		return "RESET"
	}
	return "UNKNOWN"
}

// HeaderFlags are bits in the common header.
type HeaderFlags uint16

const (
	// FlagAckReq asks the receiver to acknowledge this path at once instead
	// of waiting for the coalescing threshold (set on tail probes and on the
	// last packet of a message).
	FlagAckReq HeaderFlags = 1 << 0
	// FlagRetransmit marks a resent packet (informational; counted).
	FlagRetransmit HeaderFlags = 1 << 1
	// FlagGenProof marks a sequenced packet whose timestamp field holds,
	// instead of the stamp, the proof that lets its receiver adopt a new
	// generation of the path (genproof.go, protocol.md §8.2). Bits 2-4
	// are the sealed modes' (seal.go).
	FlagGenProof HeaderFlags = 1 << 5
	// FlagSolo marks a data packet that is its message's only packet:
	// offset 0 and msg_len the payload's length, so the message
	// extension leaves both out (wire_msg.go). Message opcodes other than
	// READ_REQ only.
	FlagSolo HeaderFlags = 1 << 6
	// FlagStatus marks a READ_RESP whose extension carries the status that
	// ends the READ (wire_msg.go). READ_RESP only.
	FlagStatus HeaderFlags = 1 << 7
	// flagsKnown is the set of flags this version defines; others must be 0.
	flagsKnown = FlagAckReq | FlagRetransmit | FlagGenProof | FlagSolo | FlagStatus
)

// Header is the common header every packet starts with.
//
//	off len field
//	 0   1  version (2)
//	 1   1  opcode
//	 2   2  flags
//	 4   4  dst_conn     connection id chosen by the receiver (0 only in CONNECT)
//	 8   4  src_conn     connection id chosen by the sender
//	12   4  incarnation  the sender's incarnation
//	16   2  path_id      path within the connection
//	18   2  path_gen     generation of the path's sequence space
//	20   4  psn          per-path sequence number (0 when unsequenced)
//	24   8  timestamp    sequenced: the stamp, echoed in ACKs for RTT (or,
//	                     with FlagGenProof, a generation's proof); else the
//	                     tag proving the receiver's token (token.go)
type Header struct {
	Opcode      Opcode
	Flags       HeaderFlags
	DstConn     ConnID
	SrcConn     ConnID
	Incarnation Incarnation
	Path        verbs.PathID
	PathGen     uint16
	PSN         PSN
	Timestamp   verbs.Time
}

// Errors returned by the decoders. Decoders never panic on any input.
var (
	ErrShort       = errors.New("metaroce: packet too short")
	ErrVersion     = errors.New("metaroce: unsupported version")
	ErrOpcode      = errors.New("metaroce: unknown opcode")
	ErrFlags       = errors.New("metaroce: undefined flag bits set")
	ErrLength      = errors.New("metaroce: length fields disagree with the packet size")
	ErrCRC         = errors.New("metaroce: CRC32C mismatch")
	ErrField       = errors.New("metaroce: field value out of range")
	ErrBufTooSmall = errors.New("metaroce: buffer too small")
)

// Put writes h into b[:HeaderLen]. b must hold at least HeaderLen bytes.
func (h *Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	b[0] = WireVersion
	b[1] = byte(h.Opcode)
	binary.BigEndian.PutUint16(b[2:], uint16(h.Flags))
	binary.BigEndian.PutUint32(b[4:], uint32(h.DstConn))
	binary.BigEndian.PutUint32(b[8:], uint32(h.SrcConn))
	binary.BigEndian.PutUint32(b[12:], uint32(h.Incarnation))
	binary.BigEndian.PutUint16(b[16:], uint16(h.Path))
	binary.BigEndian.PutUint16(b[18:], h.PathGen)
	binary.BigEndian.PutUint32(b[20:], uint32(h.PSN))
	binary.BigEndian.PutUint64(b[24:], uint64(h.Timestamp))
}

// Decode parses the common header from b. It checks the version, the
// opcode and the flags; it does not check the CRC (see CheckCRC).
func (h *Header) Decode(b []byte) error { return h.decode(b, flagsKnown) }

// decode is Decode accepting the flags in allowed (the sealed modes add
// theirs, seal.go).
func (h *Header) decode(b []byte, allowed HeaderFlags) error {
	if len(b) < HeaderLen {
		return ErrShort
	}
	if b[0] != WireVersion {
		return ErrVersion
	}
	op := Opcode(b[1])
	if !validOpcode(op) {
		return ErrOpcode
	}
	flags := HeaderFlags(binary.BigEndian.Uint16(b[2:]))
	if flags&^allowed != 0 {
		return ErrFlags
	}
	// The extension's flags belong to the opcodes whose extension they
	// shape.
	if (flags&FlagSolo != 0 && (!op.CarriesMsg() || op == OpReadReq)) ||
		(flags&FlagStatus != 0 && op != OpReadResp) {
		return ErrFlags
	}
	h.Opcode = op
	h.Flags = flags
	h.DstConn = ConnID(binary.BigEndian.Uint32(b[4:]))
	h.SrcConn = ConnID(binary.BigEndian.Uint32(b[8:]))
	h.Incarnation = Incarnation(binary.BigEndian.Uint32(b[12:]))
	h.Path = verbs.PathID(binary.BigEndian.Uint16(b[16:]))
	h.PathGen = binary.BigEndian.Uint16(b[18:])
	h.PSN = PSN(binary.BigEndian.Uint32(b[20:]))
	h.Timestamp = verbs.Time(binary.BigEndian.Uint64(b[24:]))
	return nil
}

func validOpcode(op Opcode) bool {
	return (op >= OpWrite && op <= OpNop) || op == OpAck || op == OpNak ||
		(op >= OpConnect && op <= opcodeMaxValid)
}
