package metaroce

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/verbs"
)

// NakLen is the size of the NAK extension.
const NakLen = 20

// NakBody refuses one sequenced packet. The refused PSN is not acknowledged:
// the sender fills it with a NOP once it has acted on the NAK, so a lost NAK
// is repaired like lost data (the sender resends, the receiver refuses again).
//
//	off len field
//	 0   2  path_id   path of the refused packet
//	 2   2  path_gen
//	 4   4  psn       the refused packet
//	 8   2  stream
//	10   1  status    why (a Status value: remote access, length, RNR, ...)
//	11   1  reserved  zero
//	12   4  msg_seq   message the packet belonged to
//	16   4  rnr_ns    for RNR: the receiver's suggested back-off, ns (0 = sender's default)
type NakBody struct {
	Path    verbs.PathID
	PathGen uint16
	PSN     PSN
	Stream  StreamID
	Status  verbs.Status
	MsgSeq  MsgSeq
	RNRWait uint32
}

// Put writes n into b[:NakLen].
func (n *NakBody) Put(b []byte) {
	_ = b[NakLen-1]
	binary.BigEndian.PutUint16(b[0:], uint16(n.Path))
	binary.BigEndian.PutUint16(b[2:], n.PathGen)
	binary.BigEndian.PutUint32(b[4:], uint32(n.PSN))
	binary.BigEndian.PutUint16(b[8:], uint16(n.Stream))
	b[10] = byte(n.Status)
	b[11] = 0
	binary.BigEndian.PutUint32(b[12:], uint32(n.MsgSeq))
	binary.BigEndian.PutUint32(b[16:], n.RNRWait)
}

// Decode parses a NAK extension; body must be exactly NakLen bytes.
func (n *NakBody) Decode(body []byte) error {
	if len(body) != NakLen {
		return ErrLength
	}
	n.Path = verbs.PathID(binary.BigEndian.Uint16(body[0:]))
	n.PathGen = binary.BigEndian.Uint16(body[2:])
	n.PSN = PSN(binary.BigEndian.Uint32(body[4:]))
	n.Stream = StreamID(binary.BigEndian.Uint16(body[8:]))
	n.Status = verbs.Status(body[10])
	if body[11] != 0 {
		return ErrField
	}
	if !nakable(n.Status) {
		return ErrField
	}
	n.MsgSeq = MsgSeq(binary.BigEndian.Uint32(body[12:]))
	n.RNRWait = binary.BigEndian.Uint32(body[16:])
	return nil
}

// ConnectLen is the size of the CONNECT and ACCEPT extension.
const ConnectLen = 32

// ConnectBody carries the parameters proposed in CONNECT and the negotiated
// ones in ACCEPT (each the minimum of both sides' limits).
//
//	off len field
//	 0   8  node_id     the sender's stable identity
//	 8   2  paths       number of paths (1..256)
//	10   2  mtu         payload bytes per packet (256..9000)
//	12   2  streams     number of streams (1..65535)
//	14   1  planes      number of planes (1..16)
//	15   1  reserved    zero
//	16  16  token       the sender's secret of this connection (token.go)
type ConnectBody struct {
	Node    NodeID
	Paths   uint16
	MTU     uint16
	Streams uint16
	Planes  uint8
	Token   Token
}

// Limits on negotiated parameters.
const (
	MaxPaths  = 256
	MinMTU    = 256
	MaxMTU    = 9000
	MaxPlanes = 16
)

// Put writes c into b[:ConnectLen].
func (c *ConnectBody) Put(b []byte) {
	_ = b[ConnectLen-1]
	binary.BigEndian.PutUint64(b[0:], uint64(c.Node))
	binary.BigEndian.PutUint16(b[8:], c.Paths)
	binary.BigEndian.PutUint16(b[10:], c.MTU)
	binary.BigEndian.PutUint16(b[12:], c.Streams)
	b[14] = c.Planes
	b[15] = 0
	copy(b[16:], c.Token[:])
}

// Decode parses and range-checks a CONNECT/ACCEPT extension.
func (c *ConnectBody) Decode(body []byte) error {
	if len(body) != ConnectLen {
		return ErrLength
	}
	c.Node = NodeID(binary.BigEndian.Uint64(body[0:]))
	c.Paths = binary.BigEndian.Uint16(body[8:])
	c.MTU = binary.BigEndian.Uint16(body[10:])
	c.Streams = binary.BigEndian.Uint16(body[12:])
	c.Planes = body[14]
	copy(c.Token[:], body[16:])
	if body[15] != 0 {
		return ErrField
	}
	if c.Paths == 0 || c.Paths > MaxPaths || c.MTU < MinMTU || c.MTU > MaxMTU ||
		c.Streams == 0 || c.Planes == 0 || c.Planes > MaxPlanes {
		return ErrField
	}
	return nil
}
