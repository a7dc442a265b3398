package rocev2

import "encoding/binary"

// Connection management travels in band, as on real RoCEv2 NICs: the
// InfiniBand Communication Manager protocol (IBA chapter 12) in MADs sent
// as UD SEND Only packets from QP1 to QP1 (the General Services Interface),
// with the well-known GSI Q_Key. The exchange is the CM's three-way
// handshake:
//
//	active side                         passive side
//	REQ  (local QPN, starting PSN,  -->  creates the QP, picks its own
//	      path MTU, retry counts)        QPN and PSN
//	                                <--  REP  (its QPN, starting PSN)
//	RTU                             -->  (or the first request on the QP)
//
// REJ refuses a REQ (the passive side does not accept connections); DREQ and
// DREP tear a connection down. Only the fields this transport uses are
// filled; the rest are zero, as the IBA allows for unused fields. Message
// layouts follow IBA Tables 99 (REQ), 103 (REP), 104 (RTU), 102 (REJ),
// 105 (DREQ) and 106 (DREP); Wireshark decodes them as "CM".
const (
	// MADLen is the size of every management datagram.
	MADLen = 256
	// madHeaderLen is the MAD common header; the CM message follows.
	madHeaderLen = 24
	// CMPacketLen is the UDP payload of a CM packet.
	CMPacketLen = BTHLen + DETHLen + MADLen + ICRCLen

	// GSIQKey is the well-known Q_Key of QP1 (IBA 13.5.4.3).
	GSIQKey = 0x80010000
	// GSIQP is the queue pair of the General Services Interface.
	GSIQP = 1

	madBaseVersion  = 1
	madClassCM      = 0x07
	madClassVersion = 2
	madMethodSend   = 0x03
)

// CM attribute ids (IBA Table 97).
const (
	AttrREQ  uint16 = 0x0010
	AttrREJ  uint16 = 0x0012
	AttrREP  uint16 = 0x0013
	AttrRTU  uint16 = 0x0014
	AttrDREQ uint16 = 0x0015
	AttrDREP uint16 = 0x0016
)

// REJ reasons used here (IBA Table 103).
const (
	RejectNoQP           uint16 = 1  // no QP available
	RejectInvalidCommID  uint16 = 5  // stale or unknown communication id
	RejectConsumerReject uint16 = 28 // the passive side does not accept connections
)

// CMMessage is one decoded CM message. Which fields a message carries
// depends on Attr; the others are zero.
type CMMessage struct {
	Attr         uint16
	TID          uint64 // MAD transaction id: the same for a REQ and its REP/RTU/REJ
	LocalCommID  uint32 // the sender's communication id
	RemoteCommID uint32 // the receiver's (all but REQ)
	// QPN is the sender's QP number (REQ, REP) or the receiver's (DREQ:
	// "remote QPN").
	QPN                uint32
	StartPSN           PSN    // REQ, REP
	MTU                int    // REQ, REP: path MTU in bytes (256..4096)
	RetryCount         uint8  // REQ
	RNRRetryCount      uint8  // REQ, REP
	ResponderResources uint8  // REQ, REP
	InitiatorDepth     uint8  // REQ, REP
	AckTimeout         uint8  // REQ: primary path local ACK timeout code
	PKey               uint16 // REQ
	SrcIP, DstIP       IPv4   // REQ: primary path GIDs (IPv4-mapped)
	RejectReason       uint16 // REJ
	RejectedMsg        uint8  // REJ: 0 = REQ, 1 = REP, 2 = other
}

// mtuCode converts a path MTU in bytes to the IBA enumeration (Table 159).
func mtuCode(mtu int) uint8 {
	switch mtu {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

func mtuFromCode(c uint8) int {
	if c < 1 || c > 5 {
		return 0
	}
	return 128 << c
}

// gidFromIPv4 writes the IPv4-mapped IPv6 GID of ip (::ffff:a.b.c.d), the
// GID RoCEv2 uses for IPv4 addresses.
func gidFromIPv4(b []byte, ip IPv4) {
	clear(b[:16])
	b[10], b[11] = 0xFF, 0xFF
	copy(b[12:16], ip[:])
}

// Put writes m as a whole MAD into b[:MADLen].
func (m *CMMessage) Put(b []byte) {
	b = b[:MADLen]
	clear(b)
	b[0], b[1], b[2], b[3] = madBaseVersion, madClassCM, madClassVersion, madMethodSend
	binary.BigEndian.PutUint64(b[8:], m.TID)
	binary.BigEndian.PutUint16(b[16:], m.Attr)
	d := b[madHeaderLen:]
	be := binary.BigEndian
	switch m.Attr {
	case AttrREQ:
		be.PutUint32(d[0:], m.LocalCommID)
		be.PutUint32(d[32:], m.QPN<<8|uint32(m.ResponderResources))
		be.PutUint32(d[36:], uint32(m.InitiatorDepth))
		// remote CM response timeout 20 (4.096 µs * 2^20), RC, no e2e credits
		d[43] = 20 << 3
		be.PutUint32(d[44:], uint32(m.StartPSN)<<8|20<<3|uint32(m.RetryCount&7))
		be.PutUint16(d[48:], m.PKey)
		d[50] = mtuCode(m.MTU)<<4 | m.RNRRetryCount&7
		d[51] = 15 << 4 // max CM retries
		be.PutUint16(d[52:], 0xFFFF)
		be.PutUint16(d[54:], 0xFFFF) // permissive LIDs: RoCE has none
		gidFromIPv4(d[56:], m.SrcIP)
		gidFromIPv4(d[72:], m.DstIP)
		d[93] = 64 // hop limit
		d[95] = m.AckTimeout << 3
	case AttrREP:
		be.PutUint32(d[0:], m.LocalCommID)
		be.PutUint32(d[4:], m.RemoteCommID)
		be.PutUint32(d[12:], m.QPN<<8)
		be.PutUint32(d[20:], uint32(m.StartPSN)<<8)
		d[24] = m.ResponderResources
		d[25] = m.InitiatorDepth
		d[27] = m.RNRRetryCount & 7 << 5
		// Private data byte 0: the path MTU the passive side chose (the
		// REP has no MTU field; rdma_cm carries its own data here too).
		d[36] = mtuCode(m.MTU)
	case AttrRTU, AttrDREP:
		be.PutUint32(d[0:], m.LocalCommID)
		be.PutUint32(d[4:], m.RemoteCommID)
	case AttrREJ:
		be.PutUint32(d[0:], m.LocalCommID)
		be.PutUint32(d[4:], m.RemoteCommID)
		d[8] = m.RejectedMsg & 3 << 6
		be.PutUint16(d[10:], m.RejectReason)
	case AttrDREQ:
		be.PutUint32(d[0:], m.LocalCommID)
		be.PutUint32(d[4:], m.RemoteCommID)
		be.PutUint32(d[8:], m.QPN<<8)
	}
}

// Decode reads a CM MAD. It refuses other management classes, versions and
// methods, and attributes it does not implement.
func (m *CMMessage) Decode(b []byte) error {
	if len(b) < MADLen {
		return ErrShort
	}
	if b[0] != madBaseVersion || b[1] != madClassCM || b[2] != madClassVersion || b[3] != madMethodSend {
		return ErrField
	}
	be := binary.BigEndian
	*m = CMMessage{TID: be.Uint64(b[8:]), Attr: be.Uint16(b[16:])}
	d := b[madHeaderLen:MADLen]
	switch m.Attr {
	case AttrREQ:
		m.LocalCommID = be.Uint32(d[0:])
		w := be.Uint32(d[32:])
		m.QPN, m.ResponderResources = w>>8, uint8(w)
		m.InitiatorDepth = d[39]
		w = be.Uint32(d[44:])
		m.StartPSN, m.RetryCount = PSN(w>>8), uint8(w&7)
		m.PKey = be.Uint16(d[48:])
		m.MTU = mtuFromCode(d[50] >> 4)
		m.RNRRetryCount = d[50] & 7
		copy(m.SrcIP[:], d[68:72])
		copy(m.DstIP[:], d[84:88])
		m.AckTimeout = d[95] >> 3
		if m.MTU == 0 {
			return ErrField
		}
	case AttrREP:
		m.LocalCommID = be.Uint32(d[0:])
		m.RemoteCommID = be.Uint32(d[4:])
		m.QPN = be.Uint32(d[12:]) >> 8
		m.StartPSN = PSN(be.Uint32(d[20:]) >> 8)
		m.ResponderResources = d[24]
		m.InitiatorDepth = d[25]
		m.RNRRetryCount = d[27] >> 5
		m.MTU = mtuFromCode(d[36])
		if m.MTU == 0 {
			return ErrField
		}
	case AttrRTU, AttrDREP:
		m.LocalCommID = be.Uint32(d[0:])
		m.RemoteCommID = be.Uint32(d[4:])
	case AttrREJ:
		m.LocalCommID = be.Uint32(d[0:])
		m.RemoteCommID = be.Uint32(d[4:])
		m.RejectedMsg = d[8] >> 6
		m.RejectReason = be.Uint16(d[10:])
	case AttrDREQ:
		m.LocalCommID = be.Uint32(d[0:])
		m.RemoteCommID = be.Uint32(d[4:])
		m.QPN = be.Uint32(d[8:]) >> 8
	default:
		return ErrField
	}
	return nil
}
