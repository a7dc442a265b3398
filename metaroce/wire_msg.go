package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// MaxMsgHeaderLen is the longest message extension (WRITE_IMM of a
// message of several packets): the bound for buffer sizes. A packet's
// own length is MsgExtLen of its opcode and flags.
const MaxMsgHeaderLen = 34

// MsgHeader tells the receiver where a packet's payload belongs, so every
// packet can be placed on arrival without a reorder buffer.
//
// Version 2 carries only the fields the opcode needs, in this order
// (docs/protocol.md §5.1):
//
//	len field        carried by
//	 2  stream       all
//	 4  msg_seq      all
//	 4  recv_seq     WRITE_IMM, SEND, SEND_IMM (the receive it consumes)
//	 4  offset       all but READ_REQ, unless FlagSolo
//	 4  msg_len      all, unless FlagSolo (READ_REQ: bytes to read)
//	 4  rkey         WRITE, WRITE_IMM, READ_REQ
//	 8  remote_addr  WRITE, WRITE_IMM (this packet's first byte), READ_REQ
//	                 (the start of the range)
//	 4  imm          WRITE_IMM, SEND_IMM; READ_RESP with FlagStatus: the
//	                 verbs.Status that ends the READ at the requester (a
//	                 packet without payload: the responder's source was
//	                 deregistered while it served the READ)
//
// The payload is the rest of the packet before the trailer: its length
// is the datagram's, not a field. With FlagSolo the message is this one
// packet: offset 0 and msg_len the payload's length. Fields an opcode
// does not carry decode as 0.
type MsgHeader struct {
	Stream     StreamID
	PayloadLen uint16 // from the packet's length (Decode); the sender's payload (Flags, Put)
	MsgSeq     MsgSeq
	RecvSeq    MsgSeq
	Offset     uint32
	MsgLen     uint32
	RKey       verbs.RKey
	RemoteAddr uint64
	Imm        uint32
}

// FullWriteLen is the length of a full-sized WRITE packet of a message of
// several packets at MTU mtu (trailer included): the packet that bulk
// transfers are made of, the unit of rates and budgets in packets.
func FullWriteLen(mtu int) int { return HeaderLen + MsgExtLen(OpWrite, 0) + mtu + CRCLen }

// MsgExtLen is the length of the message extension of op with flags f
// (0 for an opcode that carries none).
func MsgExtLen(op Opcode, f HeaderFlags) int {
	if !op.CarriesMsg() {
		return 0
	}
	n := 6 // stream, msg_seq
	if op.consumesRecv() {
		n += 4
	}
	switch {
	case op == OpReadReq:
		n += 4 // msg_len
	case f&FlagSolo == 0:
		n += 8 // offset, msg_len
	}
	if op.targetsRegion() {
		n += 12
	}
	if carriesImm(op, f) {
		n += 4
	}
	return n
}

// consumesRecv reports whether the opcode's message consumes a receive.
func (o Opcode) consumesRecv() bool { return o == OpWriteImm || o == OpSend || o == OpSendImm }

// carriesImm reports whether op's extension under flags f ends with the
// imm word: an immediate, or a READ_RESP's status.
func carriesImm(op Opcode, f HeaderFlags) bool {
	return op == OpWriteImm || op == OpSendImm || (op == OpReadResp && f&FlagStatus != 0)
}

// targetsRegion reports whether the opcode names a remote region (rkey
// and address).
func (o Opcode) targetsRegion() bool { return o == OpWrite || o == OpWriteImm || o == OpReadReq }

// Flags returns the extension flags m's packet of op carries: FlagSolo
// for a message of one packet (not READ_REQ, whose msg_len is what to
// read), FlagStatus for a READ_RESP that ends its READ with a status.
func (m *MsgHeader) Flags(op Opcode) HeaderFlags {
	var f HeaderFlags
	if op != OpReadReq && m.Offset == 0 && m.MsgLen == uint32(m.PayloadLen) {
		f |= FlagSolo
	}
	if op == OpReadResp && m.Imm != 0 {
		f |= FlagStatus
	}
	return f
}

// Put writes m as op's extension under flags f (m.Flags(op)) into b and
// returns its length, MsgExtLen(op, f). b must hold that many bytes.
func (m *MsgHeader) Put(op Opcode, f HeaderFlags, b []byte) int {
	_ = b[MsgExtLen(op, f)-1]
	binary.BigEndian.PutUint16(b[0:], uint16(m.Stream))
	binary.BigEndian.PutUint32(b[2:], uint32(m.MsgSeq))
	n := 6
	if op.consumesRecv() {
		binary.BigEndian.PutUint32(b[n:], uint32(m.RecvSeq))
		n += 4
	}
	switch {
	case op == OpReadReq:
		binary.BigEndian.PutUint32(b[n:], m.MsgLen)
		n += 4
	case f&FlagSolo == 0:
		binary.BigEndian.PutUint32(b[n:], m.Offset)
		binary.BigEndian.PutUint32(b[n+4:], m.MsgLen)
		n += 8
	}
	if op.targetsRegion() {
		binary.BigEndian.PutUint32(b[n:], uint32(m.RKey))
		binary.BigEndian.PutUint64(b[n+4:], m.RemoteAddr)
		n += 12
	}
	if carriesImm(op, f) {
		binary.BigEndian.PutUint32(b[n:], m.Imm)
		n += 4
	}
	return n
}

// Decode parses op's extension under flags f from body (the packet after
// the common header, trailer excluded: extension and payload) and returns
// the extension's length; the payload is body[n:] and sets PayloadLen.
// It checks only what the bytes alone can tell: the extension is whole,
// the payload fits in the message (and READ_REQ and a READ_RESP with
// FlagStatus carry none; the latter's status is not 0). Placement checks (keys, bounds, access) happen
// later, against the receiver's state.
func (m *MsgHeader) Decode(op Opcode, f HeaderFlags, body []byte) (int, error) {
	n := MsgExtLen(op, f)
	if n == 0 || len(body) < n {
		return 0, ErrShort
	}
	if len(body)-n > 0xFFFF {
		return 0, ErrLength
	}
	*m = MsgHeader{
		Stream:     StreamID(binary.BigEndian.Uint16(body[0:])),
		MsgSeq:     MsgSeq(binary.BigEndian.Uint32(body[2:])),
		PayloadLen: uint16(len(body) - n),
	}
	o := 6
	if op.consumesRecv() {
		m.RecvSeq = MsgSeq(binary.BigEndian.Uint32(body[o:]))
		o += 4
	}
	switch {
	case op == OpReadReq:
		m.MsgLen = binary.BigEndian.Uint32(body[o:])
		o += 4
	case f&FlagSolo == 0:
		m.Offset = binary.BigEndian.Uint32(body[o:])
		m.MsgLen = binary.BigEndian.Uint32(body[o+4:])
		o += 8
	default:
		m.MsgLen = uint32(m.PayloadLen)
	}
	if op.targetsRegion() {
		m.RKey = verbs.RKey(binary.BigEndian.Uint32(body[o:]))
		m.RemoteAddr = binary.BigEndian.Uint64(body[o+4:])
		o += 12
	}
	if o < n {
		m.Imm = binary.BigEndian.Uint32(body[o:])
	}
	if (op == OpReadReq || f&FlagStatus != 0) && m.PayloadLen != 0 {
		return 0, ErrLength
	}
	if f&FlagStatus != 0 && m.Imm == 0 {
		return 0, ErrField // a status that ends nothing
	}
	if uint64(m.Offset)+uint64(m.PayloadLen) > uint64(m.MsgLen) {
		return 0, ErrLength
	}
	return n, nil
}
