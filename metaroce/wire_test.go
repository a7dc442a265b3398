package metaroce

import (
	"encoding/binary"
	"encoding/hex"
	"testing"
	"unsafe"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The wire format is specified in docs/protocol.md. These tests pin its
// numbers (sizes, offsets, opcode values) so that an accidental layout
// change fails here, not in an interop test against another implementation.

func TestWireConstants(t *testing.T) {
	require.Equal(t, 2, WireVersion)
	require.Equal(t, 4794, DefaultUDPPort)
	require.NotEqual(t, 4791, DefaultUDPPort, "4791 is RoCEv2")
	require.NotEqual(t, 4793, DefaultUDPPort, "4793 is Ultra Ethernet Transport")

	require.Equal(t, 32, HeaderLen)
	require.Equal(t, 34, MaxMsgHeaderLen)
	require.Equal(t, 4, AckPrefixLen)
	require.Equal(t, 56, AckBlockLen)
	require.Equal(t, 1+1+2+4+32+4+4+8, AckBlockLen, "flags, path_id, path_gen, cum, sack, ecn_ce, rate_hint, ts_echo")
	require.Equal(t, 24, AckBlockCompactLen, "a block without its 32-byte SACK bitmap")
	require.Equal(t, 20, NakLen)
	require.Equal(t, 32, ConnectLen)
	require.Equal(t, 4, CRCLen)

	require.Equal(t, 256, SackBits)
	require.Equal(t, 4, sackWords)
	require.Len(t, SackBitmap{}, 4)
	require.Equal(t, uintptr(32), unsafe.Sizeof(SackBitmap{}), "256 bits = 32 bytes")
	require.Equal(t, 255, MaxAckBlocks, "bounded by the one-byte count")

	require.Equal(t, 256, MaxPaths)
	require.Equal(t, 256, MinMTU)
	require.Equal(t, 9000, MaxMTU)
	require.Equal(t, 16, MaxPlanes)

	// Field widths of the wire types.
	require.Equal(t, uintptr(4), unsafe.Sizeof(PSN(0)))
	require.Equal(t, uintptr(4), unsafe.Sizeof(ConnID(0)))
	require.Equal(t, uintptr(4), unsafe.Sizeof(Incarnation(0)))
	require.Equal(t, uintptr(2), unsafe.Sizeof(verbs.PathID(0)))
	require.Equal(t, uintptr(2), unsafe.Sizeof(StreamID(0)))
	require.Equal(t, uintptr(4), unsafe.Sizeof(MsgSeq(0)))
	require.Equal(t, uintptr(4), unsafe.Sizeof(verbs.RKey(0)))
	require.Equal(t, uintptr(8), unsafe.Sizeof(NodeID(0)))
	require.Equal(t, uintptr(1), unsafe.Sizeof(verbs.Status(0)))
}

func TestOpcodeTable(t *testing.T) {
	type row struct {
		op                          Opcode
		value                       byte
		name                        string
		sequenced, msg, carriesData bool
	}
	table := []row{
		{OpWrite, 0x01, "WRITE", true, true, true},
		{OpWriteImm, 0x02, "WRITE_IMM", true, true, true},
		{OpSend, 0x03, "SEND", true, true, true},
		{OpSendImm, 0x04, "SEND_IMM", true, true, true},
		{OpReadReq, 0x05, "READ_REQ", true, true, false},
		{OpReadResp, 0x06, "READ_RESP", true, true, true},
		{OpNop, 0x07, "NOP", true, false, false},
		{OpAck, 0x10, "ACK", false, false, false},
		{OpNak, 0x11, "NAK", false, false, false},
		{OpConnect, 0x20, "CONNECT", false, false, false},
		{OpAccept, 0x21, "ACCEPT", false, false, false},
		{OpClose, 0x22, "CLOSE", false, false, false},
		{OpCloseAck, 0x23, "CLOSE_ACK", false, false, false},
		{OpKeepalive, 0x24, "KEEPALIVE", false, false, false},
		{OpReset, 0x25, "RESET", false, false, false},
	}
	valid := map[byte]bool{}
	for _, r := range table {
		require.Equal(t, r.value, byte(r.op), r.name)
		require.Equal(t, r.name, r.op.String())
		require.Equal(t, r.sequenced, r.op.Sequenced(), r.name)
		require.Equal(t, r.msg, r.op.CarriesMsg(), r.name)
		require.Equal(t, r.carriesData, r.op.CarriesPayload(), r.name)
		valid[r.value] = true
	}
	// Exactly these 15 values are valid; every other byte is refused by the
	// header decoder.
	for v := 0; v < 256; v++ {
		op := Opcode(v)
		require.Equal(t, valid[byte(v)], validOpcode(op), "opcode 0x%02x", v)
		if !valid[byte(v)] {
			require.Equal(t, "UNKNOWN", op.String())
			require.False(t, op.Sequenced(), "opcode 0x%02x", v)
			require.False(t, op.CarriesMsg(), "opcode 0x%02x", v)
		}
	}
	require.Equal(t, HeaderFlags(1), FlagAckReq)
	require.Equal(t, HeaderFlags(2), FlagRetransmit)
}

// wtHeader is a header whose every field has distinct, non-zero bytes, so
// a field written to the wrong offset or truncated is visible.
func wtHeader() Header {
	return Header{
		Opcode:      OpWriteImm,
		Flags:       FlagAckReq | FlagRetransmit,
		DstConn:     0x11121314,
		SrcConn:     0x21222324,
		Incarnation: 0x31323334,
		Path:        0x4142,
		PathGen:     0x5152,
		PSN:         0x61626364,
		Timestamp:   0x7172737475767778,
	}
}

func TestHeaderRoundTripAndGoldenLayout(t *testing.T) {
	h := wtHeader()
	b := make([]byte, HeaderLen)
	h.Put(b)
	want, err := hex.DecodeString(
		"02" + "02" + "0003" + // version, opcode, flags
			"11121314" + "21222324" + "31323334" + // dst_conn, src_conn, incarnation
			"4142" + "5152" + "61626364" + // path_id, path_gen, psn
			"7172737475767778") // timestamp
	require.NoError(t, err)
	require.Equal(t, want, b)

	// Field offsets, one by one (big-endian: the most significant byte first).
	require.Equal(t, byte(WireVersion), b[0])
	require.Equal(t, byte(OpWriteImm), b[1])
	require.Equal(t, uint16(3), binary.BigEndian.Uint16(b[2:]))
	require.Equal(t, uint32(0x11121314), binary.BigEndian.Uint32(b[4:]))
	require.Equal(t, uint32(0x21222324), binary.BigEndian.Uint32(b[8:]))
	require.Equal(t, uint32(0x31323334), binary.BigEndian.Uint32(b[12:]))
	require.Equal(t, uint16(0x4142), binary.BigEndian.Uint16(b[16:]))
	require.Equal(t, uint16(0x5152), binary.BigEndian.Uint16(b[18:]))
	require.Equal(t, uint32(0x61626364), binary.BigEndian.Uint32(b[20:]))
	require.Equal(t, uint64(0x7172737475767778), binary.BigEndian.Uint64(b[24:]))

	var g Header
	require.NoError(t, g.Decode(b))
	require.Equal(t, h, g)

	// Trailing bytes (extension, payload) are not the header's business.
	long := append(append([]byte(nil), b...), 0xEE, 0xEE)
	var g2 Header
	require.NoError(t, g2.Decode(long))
	require.Equal(t, h, g2)

	// Every valid opcode and every combination of the defined flags it may
	// carry round-trips (FlagSolo and FlagStatus only where they shape the
	// opcode's extension: TestHeaderDecodeErrors).
	for v := 0; v < 256; v++ {
		op := Opcode(v)
		if !validOpcode(op) {
			continue
		}
		for f := HeaderFlags(0); f <= flagsKnown; f++ {
			if f&^flagsKnown != 0 || (f&FlagSolo != 0 && (!op.CarriesMsg() || op == OpReadReq)) ||
				(f&FlagStatus != 0 && op != OpReadResp) {
				continue
			}
			h := Header{Opcode: Opcode(v), Flags: f, PSN: PSN(v)}
			h.Put(b)
			var g Header
			require.NoError(t, g.Decode(b))
			require.Equal(t, h, g)
		}
	}
}

func TestHeaderDecodeErrors(t *testing.T) {
	h := wtHeader()
	good := make([]byte, HeaderLen)
	h.Put(good)
	var g Header

	for n := 0; n < HeaderLen; n++ {
		require.ErrorIs(t, g.Decode(good[:n]), ErrShort, "len %d", n)
	}
	for _, v := range []byte{0, 1, 3, 0x81, 0xFF} {
		b := append([]byte(nil), good...)
		b[0] = v
		require.ErrorIs(t, g.Decode(b), ErrVersion, "version %d (1: the 40-byte extension, refused)", v)
	}
	for v := 0; v < 256; v++ {
		if validOpcode(Opcode(v)) {
			continue
		}
		b := append([]byte(nil), good...)
		b[1] = byte(v)
		require.ErrorIs(t, g.Decode(b), ErrOpcode, "opcode 0x%02x", v)
	}
	for bit := 2; bit < 16; bit++ {
		if HeaderFlags(1)<<bit&flagsKnown != 0 {
			continue
		}
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint16(b[2:], uint16(FlagAckReq)|1<<bit)
		require.ErrorIs(t, g.Decode(b), ErrFlags, "flag bit %d", bit)
	}
	// The extension's flags only on the opcodes whose extension they
	// shape.
	for op := Opcode(0); op < 0xFF; op++ {
		if !validOpcode(op) {
			continue
		}
		for _, f := range []HeaderFlags{FlagSolo, FlagStatus} {
			b := append([]byte(nil), good...)
			b[1] = byte(op)
			binary.BigEndian.PutUint16(b[2:], uint16(f))
			ok := (f == FlagSolo && op.CarriesMsg() && op != OpReadReq) || (f == FlagStatus && op == OpReadResp)
			if ok {
				require.NoError(t, g.Decode(b), "%v flags %#x", op, f)
			} else {
				require.ErrorIs(t, g.Decode(b), ErrFlags, "%v flags %#x", op, f)
			}
		}
	}
	// Version is checked before the opcode, the opcode before the flags.
	b := append([]byte(nil), good...)
	b[0], b[1], b[2] = 9, 0xFF, 0xFF
	require.ErrorIs(t, g.Decode(b), ErrVersion)
	b[0] = WireVersion
	require.ErrorIs(t, g.Decode(b), ErrOpcode)
}

func wtMsgHeader() MsgHeader {
	return MsgHeader{
		Stream:     0x0102,
		PayloadLen: 0x0304,
		MsgSeq:     0x11121314,
		RecvSeq:    0x21222324,
		Offset:     0x31320000,
		MsgLen:     0x41424344,
		RKey:       0x51525354,
		RemoteAddr: 0x6162636465666768,
		Imm:        0x71727374,
	}
}

// msgForm is one shape of the message extension: an opcode and the flags
// that shape it (FlagSolo, FlagStatus), with its length in version 2.
type msgForm struct {
	op  Opcode
	f   HeaderFlags
	len int
}

var msgForms = []msgForm{
	{OpWrite, 0, 26}, {OpWrite, FlagSolo, 18},
	{OpWriteImm, 0, 34}, {OpWriteImm, FlagSolo, 26},
	{OpSend, 0, 18}, {OpSend, FlagSolo, 10},
	{OpSendImm, 0, 22}, {OpSendImm, FlagSolo, 14},
	{OpReadReq, 0, 22},
	{OpReadResp, 0, 14}, {OpReadResp, FlagSolo, 6}, {OpReadResp, FlagStatus, 18}, {OpReadResp, FlagStatus | FlagSolo, 10},
}

// formMsg is wtMsgHeader as a packet of form fm would carry it: the
// fields fm leaves out are 0, a solo packet is its whole message, and a
// status packet has no payload.
func formMsg(fm msgForm) MsgHeader {
	m := wtMsgHeader()
	m.PayloadLen = 100
	if !fm.op.consumesRecv() {
		m.RecvSeq = 0
	}
	if !fm.op.targetsRegion() {
		m.RKey, m.RemoteAddr = 0, 0
	}
	if fm.op != OpWriteImm && fm.op != OpSendImm && fm.f&FlagStatus == 0 {
		m.Imm = 0
	}
	if fm.f&FlagStatus != 0 {
		m.PayloadLen = 0
	}
	switch {
	case fm.op == OpReadReq:
		m.Offset, m.PayloadLen = 0, 0
	case fm.f&FlagSolo != 0:
		m.Offset, m.MsgLen = 0, uint32(m.PayloadLen)
	}
	return m
}

func TestMsgExtLen(t *testing.T) {
	for _, fm := range msgForms {
		require.Equal(t, fm.len, MsgExtLen(fm.op, fm.f), "%v flags %#x", fm.op, fm.f)
		require.LessOrEqual(t, fm.len, MaxMsgHeaderLen)
	}
	require.Equal(t, MaxMsgHeaderLen, MsgExtLen(OpWriteImm, 0), "the longest")
	for _, op := range []Opcode{OpNop, OpAck, OpNak, OpConnect, OpAccept, OpClose, OpCloseAck, OpKeepalive, OpReset} {
		require.Zero(t, MsgExtLen(op, 0), "%v", op)
	}
	require.Equal(t, 32+26+4096+4, FullWriteLen(4096))
}

func TestMsgHeaderRoundTripAndGoldenLayout(t *testing.T) {
	// The two longest forms, byte by byte.
	for _, c := range []struct {
		op   Opcode
		want string
	}{
		{OpWrite, "0102" + "11121314" + // stream, msg_seq
			"31320000" + "41424344" + // offset, msg_len
			"51525354" + "6162636465666768"}, // rkey, remote_addr
		{OpWriteImm, "0102" + "11121314" + "21222324" + // stream, msg_seq, recv_seq
			"31320000" + "41424344" + // offset, msg_len
			"51525354" + "6162636465666768" + // rkey, remote_addr
			"71727374"}, // imm
		{OpSend, "0102" + "11121314" + "21222324" + "31320000" + "41424344"},
		{OpReadReq, "0102" + "11121314" + "41424344" + "51525354" + "6162636465666768"},
	} {
		m := wtMsgHeader()
		b := make([]byte, MaxMsgHeaderLen+8)
		for i := range b {
			b[i] = 0xEE
		}
		n := m.Put(c.op, 0, b)
		want, err := hex.DecodeString(c.want)
		require.NoError(t, err)
		require.Equal(t, want, b[:n], "%v", c.op)
		require.Equal(t, byte(0xEE), b[n], "%v: Put writes only its extension", c.op)
	}

	// Every form round-trips with its payload, and Flags picks the form.
	for _, fm := range msgForms {
		m := formMsg(fm)
		require.Equal(t, fm.f, m.Flags(fm.op), "%v %#x: %+v", fm.op, fm.f, m)
		body := make([]byte, fm.len+int(m.PayloadLen))
		require.Equal(t, fm.len, m.Put(fm.op, fm.f, body))
		var g MsgHeader
		n, err := g.Decode(fm.op, fm.f, body)
		require.NoError(t, err, "%v %#x", fm.op, fm.f)
		require.Equal(t, fm.len, n)
		require.Equal(t, m, g, "%v %#x", fm.op, fm.f)
	}

	// The payload may end exactly at the message's end.
	for _, m := range []MsgHeader{
		{},
		{PayloadLen: 256, Offset: 0, MsgLen: 256},
		{PayloadLen: 0xFFFF, Offset: 0xFFFFFFFF - 0xFFFF, MsgLen: 0xFFFFFFFF},
		{PayloadLen: 1, Offset: 0xFFFFFFFE, MsgLen: 0xFFFFFFFF},
	} {
		body := make([]byte, MsgExtLen(OpWrite, 0)+int(m.PayloadLen))
		m.Put(OpWrite, 0, body)
		var g MsgHeader
		_, err := g.Decode(OpWrite, 0, body)
		require.NoError(t, err, "%+v", m)
		require.Equal(t, m, g)
	}
}

func TestMsgHeaderDecodeErrors(t *testing.T) {
	var g MsgHeader
	for _, fm := range msgForms {
		m := formMsg(fm)
		good := make([]byte, fm.len)
		m.PayloadLen = 0
		if fm.f&FlagSolo != 0 {
			m.MsgLen = 0
		}
		m.Put(fm.op, fm.f, good)
		for n := 0; n < fm.len; n++ {
			_, err := g.Decode(fm.op, fm.f, good[:n])
			require.ErrorIs(t, err, ErrShort, "%v %#x len %d", fm.op, fm.f, n)
		}
	}
	_, err := g.Decode(OpNop, 0, make([]byte, 64))
	require.ErrorIs(t, err, ErrShort, "a NOP carries no extension")
	// READ_REQ and a status READ_RESP carry no payload.
	_, err = g.Decode(OpReadReq, 0, make([]byte, MsgExtLen(OpReadReq, 0)+1))
	require.ErrorIs(t, err, ErrLength)
	_, err = g.Decode(OpReadResp, FlagStatus, make([]byte, MsgExtLen(OpReadResp, FlagStatus)+1))
	require.ErrorIs(t, err, ErrLength)
	_, err = g.Decode(OpReadResp, FlagStatus, make([]byte, MsgExtLen(OpReadResp, FlagStatus)))
	require.ErrorIs(t, err, ErrField, "STATUS with status 0")
	// More payload than a length field could have said.
	_, err = g.Decode(OpWrite, FlagSolo, make([]byte, MsgExtLen(OpWrite, FlagSolo)+0x10000))
	require.ErrorIs(t, err, ErrLength)
	for _, m := range []MsgHeader{
		{PayloadLen: 1, Offset: 0, MsgLen: 0},
		{PayloadLen: 257, Offset: 0, MsgLen: 256},
		{PayloadLen: 1, Offset: 256, MsgLen: 256},
		{PayloadLen: 0, Offset: 257, MsgLen: 256},
		// offset+payload overflows 32 bits: must not wrap to "fits".
		{PayloadLen: 2, Offset: 0xFFFFFFFF, MsgLen: 0xFFFFFFFF},
		{PayloadLen: 0xFFFF, Offset: 0xFFFFFFFF, MsgLen: 0xFFFFFFFF},
	} {
		b := make([]byte, MsgExtLen(OpWrite, 0)+int(m.PayloadLen))
		m.Put(OpWrite, 0, b)
		_, err := g.Decode(OpWrite, 0, b)
		require.ErrorIs(t, err, ErrLength, "%+v", m)
	}
}

func wtAckBlock(i int) AckBlock {
	return AckBlock{
		Path:     verbs.PathID(0x02 + i%250),
		PathGen:  0x0304,
		Cum:      0x11121314,
		Sack:     SackBitmap{0x2122232425262728, 0x3132333435363738, 0x4142434445464748, 0x5152535455565758},
		ECNCount: 0x61626364,
		RateHint: 0x71727374,
		TSEcho:   0x0102030405060708,
	}
}

// wtAckBlockNoSack is wtAckBlock(i) with nothing received above cum.
func wtAckBlockNoSack(i int) AckBlock {
	a := wtAckBlock(i)
	a.Sack = SackBitmap{}
	return a
}

// wtAckBody encodes an ACK extension of one block per letter of blocks:
// 'f' a full block (wtAckBlock), 'c' a compact one (wtAckBlockNoSack).
func wtAckBody(blocks string) []byte {
	body := make([]byte, AckPrefixLen, AckPrefixLen+len(blocks)*AckBlockLen)
	PutAckPrefix(body, len(blocks))
	for i, k := range blocks {
		a := wtAckBlock(i)
		if k == 'c' {
			a = wtAckBlockNoSack(i)
		}
		body = body[:len(body)+a.Len()]
		a.Put(body[len(body)-a.Len():])
	}
	return body
}

func TestAckRoundTripAndGoldenLayout(t *testing.T) {
	a := wtAckBlock(0)
	b := make([]byte, AckBlockLen)
	require.Equal(t, AckBlockLen, a.Len())
	require.Equal(t, AckBlockLen, a.Put(b))
	want, err := hex.DecodeString(
		"00" + "02" + "0304" + "11121314" + // flags, path_id, path_gen, cum
			"2122232425262728" + "3132333435363738" + // sack word 0, word 1
			"4142434445464748" + "5152535455565758" + // sack word 2, word 3
			"61626364" + "71727374" + // ecn_ce, rate_hint
			"0102030405060708") // ts_echo
	require.NoError(t, err)
	require.Equal(t, want, b)
	require.Equal(t, uint32(0x11121314), binary.BigEndian.Uint32(b[4:]))
	require.Equal(t, uint64(0x2122232425262728), binary.BigEndian.Uint64(b[8:]))
	require.Equal(t, uint64(0x5152535455565758), binary.BigEndian.Uint64(b[32:]))
	require.Equal(t, uint32(0x61626364), binary.BigEndian.Uint32(b[40:]))
	require.Equal(t, uint32(0x71727374), binary.BigEndian.Uint32(b[44:]))
	require.Equal(t, uint64(0x0102030405060708), binary.BigEndian.Uint64(b[48:]))

	var g AckBlock
	n, err := g.Decode(b)
	require.NoError(t, err)
	require.Equal(t, AckBlockLen, n)
	require.Equal(t, a, g)
	for n := 0; n < AckBlockLen; n++ {
		_, err := g.Decode(b[:n])
		require.ErrorIs(t, err, ErrShort, "len %d", n)
	}

	// Without SACK bits the bitmap is left out and the flag says so.
	c := wtAckBlockNoSack(0)
	cb := make([]byte, AckBlockCompactLen)
	require.Equal(t, AckBlockCompactLen, c.Len())
	require.Equal(t, AckBlockCompactLen, c.Put(cb))
	want, err = hex.DecodeString("01" + "02" + "0304" + "11121314" + "61626364" + "71727374" + "0102030405060708")
	require.NoError(t, err)
	require.Equal(t, want, cb)
	g = wtAckBlock(9) // Decode clears a bitmap left from before
	n, err = g.Decode(cb)
	require.NoError(t, err)
	require.Equal(t, AckBlockCompactLen, n)
	require.Equal(t, c, g)
	for n := 0; n < AckBlockCompactLen; n++ {
		_, err := g.Decode(cb[:n])
		require.ErrorIs(t, err, ErrShort, "len %d", n)
	}

	// A full block whose bitmap happens to be zero (as the first version
	// of the format always wrote it) decodes to the same block.
	full := make([]byte, AckBlockLen)
	copy(full, b[:8])
	copy(full[40:], b[40:])
	n, err = g.Decode(full)
	require.NoError(t, err)
	require.Equal(t, AckBlockLen, n)
	require.Equal(t, c, g)

	// Undefined flags are refused.
	for _, fl := range []byte{0x02, 0x03, 0x80, 0xFF} {
		bad := append([]byte(nil), b...)
		bad[0] = fl
		_, err := g.Decode(bad)
		require.ErrorIs(t, err, ErrField, "flags %#x", fl)
	}

	// A whole ACK extension: prefix plus blocks, full and compact mixed,
	// for 0, 1, 3 and 255 blocks.
	block := func(i int) AckBlock {
		if i%3 == 1 {
			return wtAckBlockNoSack(i)
		}
		return wtAckBlock(i)
	}
	for _, count := range []int{0, 1, 3, MaxAckBlocks} {
		size := AckPrefixLen
		for i := 0; i < count; i++ {
			a := block(i)
			size += a.Len()
		}
		body := make([]byte, size)
		for i := range body {
			body[i] = 0xEE
		}
		PutAckPrefix(body, count)
		require.Equal(t, []byte{byte(count), 0, 0, 0}, body[:AckPrefixLen])
		o := AckPrefixLen
		for i := 0; i < count; i++ {
			a := block(i)
			o += a.Put(body[o:])
		}
		require.Equal(t, size, o)
		n, err := DecodeAckPrefix(body)
		require.NoError(t, err)
		require.Equal(t, count, n)
		o = AckPrefixLen
		for i := 0; i < n; i++ {
			var g AckBlock
			l, err := g.Decode(body[o:])
			require.NoError(t, err)
			o += l
			require.Equal(t, block(i), g)
		}
	}
}

// TestSackBitmapWireBits pins the bit numbering on the wire: bit i of the
// bitmap (PSN cum+1+i) is bit i%64 of word i/64, and each word is a
// big-endian uint64, so bit i lives in byte 8+8*(i/64)+7-(i%64)/8 of the
// block, under mask 1<<(i%8).
func TestSackBitmapWireBits(t *testing.T) {
	for _, i := range []int{0, 1, 7, 8, 63, 64, 65, 127, 128, 191, 192, 254, 255} {
		var a AckBlock
		a.Cum = 1000
		a.Sack[i/64] |= 1 << (i % 64)
		require.True(t, a.Sack.Has(i))
		b := make([]byte, AckBlockLen)
		a.Put(b)
		sack := b[8:40]
		for j, v := range sack {
			wantByte := 8*(i/64) + 7 - (i%64)/8
			if j == wantByte {
				require.Equal(t, byte(1)<<(i%8), v, "bit %d", i)
			} else {
				require.Zero(t, v, "bit %d: byte %d", i, j)
			}
		}
	}
	// Bit 0 (PSN cum+1) is the least significant bit of the 8th SACK byte,
	// bit 255 (PSN cum+256) the most significant bit of the 25th.
	var a AckBlock
	a.Sack[0] = 1
	a.Sack[3] = 1 << 63
	b := make([]byte, AckBlockLen)
	a.Put(b)
	require.Equal(t, byte(0x01), b[8+7])
	require.Equal(t, byte(0x80), b[8+24])
}

func TestAckPrefixDecodeErrors(t *testing.T) {
	for n := 0; n < AckPrefixLen; n++ {
		_, err := DecodeAckPrefix(make([]byte, n))
		require.ErrorIs(t, err, ErrShort, "len %d", n)
	}
	for i := 1; i < AckPrefixLen; i++ {
		body := make([]byte, AckPrefixLen)
		body[i] = 1
		_, err := DecodeAckPrefix(body)
		require.ErrorIs(t, err, ErrField, "reserved byte %d", i)
	}
	// blocks: the encoded blocks (f = full, c = compact); extra: bytes
	// added (or cut, negative) after them.
	for _, c := range []struct {
		count  int
		blocks string
		extra  int
	}{
		{1, "", 0},    // announces a block that is not there
		{0, "f", 0},   // a block the count does not announce
		{2, "f", 0},   // one short
		{2, "c", 0},   // one short (compact)
		{1, "f", 1},   // a stray byte
		{1, "c", 1},   // a stray byte after a compact block
		{1, "f", -1},  // a truncated block
		{1, "c", -1},  // a truncated compact block
		{2, "cf", -1}, // the second block truncated
		{1, "fc", 0},  // two blocks, one announced
		{0, "", 3},    // junk after an empty prefix
		{255, "", 0},  // the largest count with nothing behind it
	} {
		body := wtAckBody(c.blocks)
		if c.extra > 0 {
			body = append(body, make([]byte, c.extra)...)
		} else {
			body = body[:len(body)+c.extra]
		}
		PutAckPrefix(body, c.count)
		_, err := DecodeAckPrefix(body)
		require.ErrorIs(t, err, ErrLength, "%+v", c)
	}
	// An undefined flag in any block refuses the whole ACK.
	body := wtAckBody("cf")
	_, err := DecodeAckPrefix(body)
	require.NoError(t, err)
	body[AckPrefixLen+AckBlockCompactLen] = 0x04
	_, err = DecodeAckPrefix(body)
	require.ErrorIs(t, err, ErrField)
}

func TestNakRoundTripAndGoldenLayout(t *testing.T) {
	n := NakBody{Path: 0x0102, PathGen: 0x0304, PSN: 0x11121314, Stream: 0x2122,
		Status: verbs.StatusReceiverNotReady, MsgSeq: 0x31323334, RNRWait: 0x41424344}
	b := make([]byte, NakLen)
	for i := range b {
		b[i] = 0xEE
	}
	n.Put(b)
	want, err := hex.DecodeString("0102" + "0304" + "11121314" + "2122" + "09" + "00" + "31323334" + "41424344")
	require.NoError(t, err)
	require.Equal(t, want, b)
	require.Equal(t, byte(verbs.StatusReceiverNotReady), b[10])
	require.Zero(t, b[11])

	var g NakBody
	require.NoError(t, g.Decode(b))
	require.Equal(t, n, g)

	// Exactly the statuses a receiver can refuse a packet with.
	nakable := map[verbs.Status]bool{
		verbs.StatusLocalLengthError: true, verbs.StatusRemoteAccessError: true, verbs.StatusRemoteOpError: true,
		verbs.StatusRemoteInvalidReq: true, verbs.StatusReceiverNotReady: true,
	}
	require.Equal(t, verbs.Status(1), verbs.StatusLocalLengthError)
	require.Equal(t, verbs.Status(3), verbs.StatusRemoteAccessError)
	require.Equal(t, verbs.Status(4), verbs.StatusRemoteOpError)
	require.Equal(t, verbs.Status(8), verbs.StatusRemoteInvalidReq)
	require.Equal(t, verbs.Status(9), verbs.StatusReceiverNotReady)
	for v := 0; v < 256; v++ {
		n.Status = verbs.Status(v)
		n.Put(b)
		err := g.Decode(b)
		if nakable[verbs.Status(v)] {
			require.NoError(t, err, "status %d", v)
			require.Equal(t, n, g)
		} else {
			require.ErrorIs(t, err, ErrField, "status %d", v)
		}
	}
}

func TestNakDecodeErrors(t *testing.T) {
	n := NakBody{Status: verbs.StatusRemoteAccessError}
	good := make([]byte, NakLen)
	n.Put(good)
	var g NakBody
	for _, l := range []int{0, 1, NakLen - 1, NakLen + 1, 2 * NakLen} {
		b := make([]byte, l)
		copy(b, good)
		require.ErrorIs(t, g.Decode(b), ErrLength, "len %d", l)
	}
	b := append([]byte(nil), good...)
	b[11] = 1
	require.ErrorIs(t, g.Decode(b), ErrField, "reserved byte")
	b = append([]byte(nil), good...)
	b[10] = byte(verbs.StatusSuccess)
	require.ErrorIs(t, g.Decode(b), ErrField, "success is not a refusal")
}

func TestConnectRoundTripAndGoldenLayout(t *testing.T) {
	c := ConnectBody{Node: 0x0102030405060708, Paths: 0x0100, MTU: 0x2328, Streams: 0xFFFF, Planes: 0x10,
		Token: Token{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}}
	b := make([]byte, ConnectLen)
	for i := range b {
		b[i] = 0xEE
	}
	c.Put(b)
	want, err := hex.DecodeString("0102030405060708" + "0100" + "2328" + "ffff" + "10" + "00" + "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf")
	require.NoError(t, err)
	require.Equal(t, want, b)
	var g ConnectBody
	require.NoError(t, g.Decode(b))
	require.Equal(t, c, g)

	// The limits are inclusive.
	for _, c := range []ConnectBody{
		{Paths: 1, MTU: 256, Streams: 1, Planes: 1},
		{Paths: 256, MTU: 9000, Streams: 65535, Planes: 16},
		{Node: 1, Paths: 8, MTU: 4096, Streams: 1024, Planes: 2},
	} {
		c.Put(b)
		var g ConnectBody
		require.NoError(t, g.Decode(b), "%+v", c)
		require.Equal(t, c, g)
	}
}

func TestConnectDecodeErrors(t *testing.T) {
	ok := ConnectBody{Node: 7, Paths: 8, MTU: 4096, Streams: 16, Planes: 2}
	good := make([]byte, ConnectLen)
	ok.Put(good)
	var g ConnectBody
	require.NoError(t, g.Decode(good))
	for _, l := range []int{0, ConnectLen - 1, ConnectLen + 1} {
		b := make([]byte, l)
		copy(b, good)
		require.ErrorIs(t, g.Decode(b), ErrLength, "len %d", l)
	}
	b := append([]byte(nil), good...)
	b[15] = 1
	require.ErrorIs(t, g.Decode(b), ErrField, "reserved byte")
	for _, mut := range []func(*ConnectBody){
		func(c *ConnectBody) { c.Paths = 0 },
		func(c *ConnectBody) { c.Paths = 257 },
		func(c *ConnectBody) { c.Paths = 0xFFFF },
		func(c *ConnectBody) { c.MTU = 0 },
		func(c *ConnectBody) { c.MTU = 255 },
		func(c *ConnectBody) { c.MTU = 9001 },
		func(c *ConnectBody) { c.Streams = 0 },
		func(c *ConnectBody) { c.Planes = 0 },
		func(c *ConnectBody) { c.Planes = 17 },
		func(c *ConnectBody) { c.Planes = 255 },
	} {
		c := ok
		mut(&c)
		b := make([]byte, ConnectLen)
		c.Put(b)
		require.ErrorIs(t, g.Decode(b), ErrField, "%+v", c)
	}
}

func TestCRC32C(t *testing.T) {
	// The standard CRC-32C check value: CRC32C("123456789") = 0xE3069283.
	// It proves the polynomial is Castagnoli (not IEEE: 0xCBF43926).
	pkt := append([]byte("123456789"), 0, 0, 0, 0)
	n := SealCRC(pkt, 9)
	require.Equal(t, 9+CRCLen, n)
	require.Equal(t, []byte{0xE3, 0x06, 0x92, 0x83}, pkt[9:13], "big-endian trailer")

	// A sealed NOP: the trailer covers every byte before it.
	h := wtHeader()
	h.Opcode = OpNop
	buf := make([]byte, HeaderLen+CRCLen)
	h.Put(buf)
	n = SealCRC(buf, HeaderLen)
	require.Equal(t, HeaderLen+CRCLen, n)
	body, err := CheckCRC(buf)
	require.NoError(t, err)
	require.Equal(t, buf[:HeaderLen], body)

	for l := 0; l < HeaderLen+CRCLen; l++ {
		_, err := CheckCRC(make([]byte, l))
		require.ErrorIs(t, err, ErrShort, "len %d", l)
	}
}

// TestCRCDetectsEveryBitFlip flips each bit of a sealed data packet in
// turn (header, extension, payload and the trailer itself) and expects
// every flip to be caught.
func TestCRCDetectsEveryBitFlip(t *testing.T) {
	h := wtHeader()
	m := wtMsgHeader()
	m.Offset, m.MsgLen, m.PayloadLen = 0, 300, 300
	ext := MsgExtLen(h.Opcode, h.Flags)
	pkt := make([]byte, HeaderLen+ext+300+CRCLen)
	h.Put(pkt)
	m.Put(h.Opcode, h.Flags, pkt[HeaderLen:])
	for i := 0; i < 300; i++ {
		pkt[HeaderLen+ext+i] = byte(i * 13)
	}
	n := SealCRC(pkt, len(pkt)-CRCLen)
	require.Equal(t, len(pkt), n)
	_, err := CheckCRC(pkt)
	require.NoError(t, err)
	for bit := 0; bit < 8*len(pkt); bit++ {
		pkt[bit/8] ^= 1 << (bit % 8)
		_, err := CheckCRC(pkt)
		require.ErrorIs(t, err, ErrCRC, "bit %d", bit)
		pkt[bit/8] ^= 1 << (bit % 8)
	}
	// Truncating or extending the packet is caught too.
	_, err = CheckCRC(pkt[:len(pkt)-1])
	require.ErrorIs(t, err, ErrCRC)
	_, err = CheckCRC(append(append([]byte(nil), pkt...), 0))
	require.ErrorIs(t, err, ErrCRC)
}

// TestGoldenNopPacket is the worked example of docs/protocol.md: if this
// test changes, the document must change with it.
func TestGoldenNopPacket(t *testing.T) {
	h := Header{Opcode: OpNop, Flags: FlagAckReq, DstConn: 2, SrcConn: 1, Incarnation: 11,
		Path: 3, PathGen: 1, PSN: 5, Timestamp: 1000000}
	buf := make([]byte, HeaderLen+CRCLen)
	h.Put(buf)
	n := SealCRC(buf, HeaderLen)
	want, err := hex.DecodeString(
		"0207" + "0001" + "00000002" + "00000001" + "0000000b" + // version, NOP, AckReq, dst, src, incarnation
			"0003" + "0001" + "00000005" + "00000000000f4240" + // path 3, gen 1, psn 5, timestamp 1 ms
			"4a171280") // CRC32C of the 32 bytes before it
	require.NoError(t, err)
	require.Equal(t, want, buf[:n])
}

// msgOf decodes the message extension of pkt (a whole packet, trailer
// included) whose header is h; false if it has none or it is malformed.
func msgOf(h *Header, m *MsgHeader, pkt []byte) bool {
	if len(pkt) < HeaderLen+CRCLen {
		return false
	}
	_, err := m.Decode(h.Opcode, h.Flags, pkt[HeaderLen:len(pkt)-CRCLen])
	return err == nil
}
