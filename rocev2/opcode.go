package rocev2

// Opcode is BTH:OpCode (IBA 9.2, Table 38). The top three bits name the
// transport (000 RC, 011 UD, 100 CNP in RoCEv2), the low five the operation.
type Opcode uint8

// The opcodes this transport sends and accepts: every RC opcode except the
// atomics, UD SEND Only (connection management MADs to QP1) and CNP.
const (
	OpSendFirst         Opcode = 0x00
	OpSendMiddle        Opcode = 0x01
	OpSendLast          Opcode = 0x02
	OpSendLastImm       Opcode = 0x03
	OpSendOnly          Opcode = 0x04
	OpSendOnlyImm       Opcode = 0x05
	OpWriteFirst        Opcode = 0x06
	OpWriteMiddle       Opcode = 0x07
	OpWriteLast         Opcode = 0x08
	OpWriteLastImm      Opcode = 0x09
	OpWriteOnly         Opcode = 0x0A
	OpWriteOnlyImm      Opcode = 0x0B
	OpReadRequest       Opcode = 0x0C
	OpReadResponseFirst Opcode = 0x0D
	OpReadResponseMid   Opcode = 0x0E
	OpReadResponseLast  Opcode = 0x0F
	OpReadResponseOnly  Opcode = 0x10
	OpAcknowledge       Opcode = 0x11
	OpUDSendOnly        Opcode = 0x64
	// OpCNP is the RoCEv2 Congestion Notification Packet (IBA Annex A17.9.3).
	OpCNP Opcode = 0x81
)

// opInfo describes the extension headers and payload rules of an opcode.
type opInfo struct {
	name    string
	valid   bool
	reth    bool // RDMA extended transport header follows the BTH
	aeth    bool // ACK extended transport header
	imm     bool // immediate data
	deth    bool // datagram extended transport header (UD)
	payload bool // may carry payload
	first   bool // first packet of a multi-packet message
	middle  bool
	last    bool // last packet (last or only)
}

var opTable = func() (t [256]opInfo) {
	set := func(o Opcode, i opInfo) { i.valid = true; t[o] = i }
	set(OpSendFirst, opInfo{name: "SEND First", payload: true, first: true})
	set(OpSendMiddle, opInfo{name: "SEND Middle", payload: true, middle: true})
	set(OpSendLast, opInfo{name: "SEND Last", payload: true, last: true})
	set(OpSendLastImm, opInfo{name: "SEND Last with Immediate", payload: true, last: true, imm: true})
	set(OpSendOnly, opInfo{name: "SEND Only", payload: true, first: true, last: true})
	set(OpSendOnlyImm, opInfo{name: "SEND Only with Immediate", payload: true, first: true, last: true, imm: true})
	set(OpWriteFirst, opInfo{name: "RDMA WRITE First", reth: true, payload: true, first: true})
	set(OpWriteMiddle, opInfo{name: "RDMA WRITE Middle", payload: true, middle: true})
	set(OpWriteLast, opInfo{name: "RDMA WRITE Last", payload: true, last: true})
	set(OpWriteLastImm, opInfo{name: "RDMA WRITE Last with Immediate", payload: true, last: true, imm: true})
	set(OpWriteOnly, opInfo{name: "RDMA WRITE Only", reth: true, payload: true, first: true, last: true})
	set(OpWriteOnlyImm, opInfo{name: "RDMA WRITE Only with Immediate", reth: true, payload: true, first: true, last: true, imm: true})
	set(OpReadRequest, opInfo{name: "RDMA READ Request", reth: true, first: true, last: true})
	set(OpReadResponseFirst, opInfo{name: "RDMA READ Response First", aeth: true, payload: true, first: true})
	set(OpReadResponseMid, opInfo{name: "RDMA READ Response Middle", payload: true, middle: true})
	set(OpReadResponseLast, opInfo{name: "RDMA READ Response Last", aeth: true, payload: true, last: true})
	set(OpReadResponseOnly, opInfo{name: "RDMA READ Response Only", aeth: true, payload: true, first: true, last: true})
	set(OpAcknowledge, opInfo{name: "Acknowledge", aeth: true})
	set(OpUDSendOnly, opInfo{name: "UD SEND Only", deth: true, payload: true, first: true, last: true})
	set(OpCNP, opInfo{name: "CNP"})
	return t
}()

// Valid reports whether this implementation knows the opcode.
func (o Opcode) Valid() bool { return opTable[o].valid }

func (o Opcode) String() string {
	if i := opTable[o]; i.valid {
		return i.name
	}
	return "unknown opcode"
}

// IsSend reports whether o is one of the RC SEND opcodes.
func (o Opcode) IsSend() bool { return o <= OpSendOnlyImm }

// IsWrite reports whether o is one of the RC RDMA WRITE opcodes.
func (o Opcode) IsWrite() bool { return o >= OpWriteFirst && o <= OpWriteOnlyImm }

// IsReadResponse reports whether o is one of the RC READ response opcodes.
func (o Opcode) IsReadResponse() bool { return o >= OpReadResponseFirst && o <= OpReadResponseOnly }

// IsRequest reports whether o is sent by a requester and occupies the
// responder's PSN space (SEND, WRITE, READ request).
func (o Opcode) IsRequest() bool { return o <= OpReadRequest }
