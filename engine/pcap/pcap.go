// Package pcap writes packet captures in the classic libpcap file format
// (the format tcpdump, Wireshark and tshark read), link type Ethernet, with
// nanosecond timestamps. It builds the Ethernet, IPv4 and UDP headers
// around a UDP payload that a transport core produced, so captures of the
// simulator or the in-memory pair open as real traffic.
//
// The frames it writes: Ethernet II (type 0x0800), IPv4 without options
// (identification 0, Don't Fragment set, header checksum computed), UDP
// with checksum 0 (allowed for IPv4, and what RoCEv2 NICs send). Those
// IPv4 values are the ones the RoCEv2 core assumes in its ICRC (see
// rocev2.ComputeICRC), so RoCEv2 packets in the capture carry valid ICRCs.
//
// A Writer is not safe for concurrent use.
package pcap

import (
	"encoding/binary"
	"errors"
	"io"
)

// File format constants.
const (
	// MagicNanoseconds is the magic number of a classic pcap file whose
	// record timestamps carry nanoseconds.
	MagicNanoseconds = 0xa1b23c4d
	// LinkTypeEthernet is LINKTYPE_ETHERNET.
	LinkTypeEthernet = 1
	// SnapLen is the largest frame recorded whole.
	SnapLen = 65535

	fileHeaderLen   = 24
	recordHeaderLen = 16
	ethHeaderLen    = 14
	ipv4HeaderLen   = 20
	udpHeaderLen    = 8
	// HeadersLen is the size of the headers WriteUDP puts around a payload.
	HeadersLen = ethHeaderLen + ipv4HeaderLen + udpHeaderLen
)

// Frame describes the headers WriteUDP builds around a UDP payload.
type Frame struct {
	SrcMAC, DstMAC   [6]byte
	SrcIP, DstIP     [4]byte
	DSCP             uint8 // 0..63
	ECN              uint8 // 0..3: 0 not ECT, 1 ECT(1), 2 ECT(0), 3 CE
	TTL              uint8 // 0 means 64
	SrcPort, DstPort uint16
}

// ErrTooLarge is returned for a payload that does not fit in one IPv4
// datagram.
var ErrTooLarge = errors.New("pcap: UDP payload too large for one IPv4 datagram")

// Writer writes one capture.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter writes the file header to w and returns a Writer. Wrap w in a
// bufio.Writer (and flush it) when writing many frames.
func NewWriter(w io.Writer) (*Writer, error) {
	h := make([]byte, fileHeaderLen)
	binary.LittleEndian.PutUint32(h[0:], MagicNanoseconds)
	binary.LittleEndian.PutUint16(h[4:], 2) // version 2.4
	binary.LittleEndian.PutUint16(h[6:], 4)
	// thiszone 0, sigfigs 0
	binary.LittleEndian.PutUint32(h[16:], SnapLen)
	binary.LittleEndian.PutUint32(h[20:], LinkTypeEthernet)
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// WriteUDP writes one Ethernet/IPv4/UDP frame carrying payload, stamped
// with ts nanoseconds since the Unix epoch (a simulator's virtual time
// works as well: it then reads as 1970).
func (w *Writer) WriteUDP(ts int64, f Frame, payload []byte) error {
	if len(payload) > 0xFFFF-ipv4HeaderLen-udpHeaderLen {
		return ErrTooLarge
	}
	n := HeadersLen + len(payload)
	if cap(w.buf) < recordHeaderLen+n {
		w.buf = make([]byte, recordHeaderLen+n)
	}
	b := w.buf[:recordHeaderLen+n]
	if ts < 0 {
		ts = 0
	}
	binary.LittleEndian.PutUint32(b[0:], uint32(ts/1e9))
	binary.LittleEndian.PutUint32(b[4:], uint32(ts%1e9))
	binary.LittleEndian.PutUint32(b[8:], uint32(n))
	binary.LittleEndian.PutUint32(b[12:], uint32(n))
	AppendFrame(b[recordHeaderLen:recordHeaderLen], f, payload)
	_, err := w.w.Write(b)
	return err
}

// AppendFrame appends the Ethernet/IPv4/UDP frame carrying payload to dst
// and returns the extended slice. The payload must fit one IPv4 datagram.
func AppendFrame(dst []byte, f Frame, payload []byte) []byte {
	start := len(dst)
	var hdr [HeadersLen]byte
	dst = append(dst, hdr[:]...)
	dst = append(dst, payload...)
	b := dst[start:]
	copy(b[0:6], f.DstMAC[:])
	copy(b[6:12], f.SrcMAC[:])
	b[12], b[13] = 0x08, 0x00
	ip := b[ethHeaderLen : ethHeaderLen+ipv4HeaderLen]
	ttl := f.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip[0] = 0x45
	ip[1] = f.DSCP<<2 | f.ECN&3
	binary.BigEndian.PutUint16(ip[2:], uint16(ipv4HeaderLen+udpHeaderLen+len(payload)))
	ip[4], ip[5] = 0, 0    // identification
	ip[6], ip[7] = 0x40, 0 // DF
	ip[8] = ttl
	ip[9] = 17
	copy(ip[12:16], f.SrcIP[:])
	copy(ip[16:20], f.DstIP[:])
	binary.BigEndian.PutUint16(ip[10:], IPv4Checksum(ip))
	u := b[ethHeaderLen+ipv4HeaderLen : HeadersLen]
	binary.BigEndian.PutUint16(u[0:], f.SrcPort)
	binary.BigEndian.PutUint16(u[2:], f.DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpHeaderLen+len(payload)))
	// checksum 0: none
	return dst
}

// IPv4Checksum returns the Internet checksum (RFC 1071) of an IPv4 header
// whose checksum field is zero; over a header with its checksum filled in it
// returns 0.
func IPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	if len(h)%2 == 1 {
		s += uint32(h[len(h)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}

// MACFromIPv4 returns a locally administered unicast MAC derived from an
// IPv4 address (02:00:a.b.c.d), for captures of hosts that have no real
// MAC.
func MACFromIPv4(ip [4]byte) [6]byte {
	return [6]byte{0x02, 0x00, ip[0], ip[1], ip[2], ip[3]}
}
