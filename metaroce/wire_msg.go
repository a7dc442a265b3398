package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// MsgHeaderLen is the size of the message extension carried by WRITE,
// WRITE_IMM, SEND, SEND_IMM, READ_REQ and READ_RESP packets.
const MsgHeaderLen = 40

// MsgHeader tells the receiver where a packet's payload belongs, so every
// packet can be placed on arrival without a reorder buffer.
//
//	off len field
//	 0   2  stream       ordered stream (queue pair) within the connection
//	 2   2  payload_len  bytes of payload in this packet
//	 4   4  msg_seq      message number within the stream (all opcodes)
//	 8   4  recv_seq     receive-consuming message number (SEND*, WRITE_IMM)
//	12   4  offset       offset of this payload within the message
//	16   4  msg_len      total message length (READ_REQ: bytes to read)
//	20   4  rkey         remote key (WRITE*, READ_REQ)
//	24   8  remote_addr  target address of this packet's first byte
//	                     (WRITE*; READ_REQ: start of the remote range)
//	32   4  imm          immediate data (*_IMM); READ_RESP: 0, or the
//	                     verbs.Status that ends the READ at the requester
//	                     (a packet without payload: the responder's source
//	                     was deregistered while it served the READ)
//	36   4  reserved     zero
type MsgHeader struct {
	Stream     StreamID
	PayloadLen uint16
	MsgSeq     MsgSeq
	RecvSeq    MsgSeq
	Offset     uint32
	MsgLen     uint32
	RKey       verbs.RKey
	RemoteAddr uint64
	Imm        uint32
}

// Put writes m into b[:MsgHeaderLen].
func (m *MsgHeader) Put(b []byte) {
	_ = b[MsgHeaderLen-1]
	binary.BigEndian.PutUint16(b[0:], uint16(m.Stream))
	binary.BigEndian.PutUint16(b[2:], m.PayloadLen)
	binary.BigEndian.PutUint32(b[4:], uint32(m.MsgSeq))
	binary.BigEndian.PutUint32(b[8:], uint32(m.RecvSeq))
	binary.BigEndian.PutUint32(b[12:], m.Offset)
	binary.BigEndian.PutUint32(b[16:], m.MsgLen)
	binary.BigEndian.PutUint32(b[20:], uint32(m.RKey))
	binary.BigEndian.PutUint64(b[24:], m.RemoteAddr)
	binary.BigEndian.PutUint32(b[32:], m.Imm)
	binary.BigEndian.PutUint32(b[36:], 0)
}

// Decode parses a message extension from b. It checks only what the bytes
// alone can tell: the reserved word is zero and the payload fits in the
// message. Placement checks (keys, bounds, access) happen later, against the
// receiver's state.
func (m *MsgHeader) Decode(b []byte) error {
	if len(b) < MsgHeaderLen {
		return ErrShort
	}
	m.Stream = StreamID(binary.BigEndian.Uint16(b[0:]))
	m.PayloadLen = binary.BigEndian.Uint16(b[2:])
	m.MsgSeq = MsgSeq(binary.BigEndian.Uint32(b[4:]))
	m.RecvSeq = MsgSeq(binary.BigEndian.Uint32(b[8:]))
	m.Offset = binary.BigEndian.Uint32(b[12:])
	m.MsgLen = binary.BigEndian.Uint32(b[16:])
	m.RKey = verbs.RKey(binary.BigEndian.Uint32(b[20:]))
	m.RemoteAddr = binary.BigEndian.Uint64(b[24:])
	m.Imm = binary.BigEndian.Uint32(b[32:])
	if binary.BigEndian.Uint32(b[36:]) != 0 {
		return ErrField
	}
	if uint64(m.Offset)+uint64(m.PayloadLen) > uint64(m.MsgLen) {
		return ErrLength
	}
	return nil
}
