package dissector

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/engine/pcap"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// TestTsharkSplitsCoalescedDatagrams: a coalesced datagram (protocol.md
// §2.1) of three packets built with the core's encoders shows each packet
// in order with its own fields, and a datagram whose second length runs
// past its end shows the packet before the fault and is flagged.
func TestTsharkSplitsCoalescedDatagrams(t *testing.T) {
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; scripts/install-deps.sh installs it (make deps)")
	w, closeCapture := newCapture(t, "coalesced.pcap")
	packet := func(op mr.Opcode, psn mr.PSN, payload int) []byte {
		m := mr.MsgHeader{Stream: 1, MsgSeq: mr.MsgSeq(psn), RecvSeq: 3, PayloadLen: uint16(payload), MsgLen: uint32(payload)}
		f := m.Flags(op)
		h := mr.Header{Opcode: op, Flags: f, DstConn: 7, SrcConn: 9, Incarnation: 11, Path: 1, PSN: psn, Timestamp: 5}
		ext := mr.MsgExtLen(op, f)
		b := make([]byte, mr.HeaderLen+ext+payload+mr.CRCLen)
		h.Put(b)
		m.Put(op, f, b[mr.HeaderLen:])
		return b[:mr.SealCRC(b, mr.HeaderLen+ext+payload)]
	}
	frame := func(pkts ...[]byte) []byte {
		d := []byte{mr.CoalesceMark}
		for _, p := range pkts {
			d = binary.BigEndian.AppendUint16(d, uint16(len(p)))
			d = append(d, p...)
		}
		return d
	}
	fr := pcap.Frame{SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2}, SrcPort: 40000, DstPort: mr.DefaultUDPPort}
	good := frame(packet(mr.OpSend, 100, 64), packet(mr.OpSend, 101, 64), packet(mr.OpSend, 102, 10))
	bad := frame(packet(mr.OpSend, 200, 64), packet(mr.OpSend, 201, 64))
	binary.BigEndian.PutUint16(bad[1+2+110:], 500) // the second length runs past the end
	for i, d := range [][]byte{good, bad} {
		if err := w.WriteUDP(int64(i+1)*1000, fr, d); err != nil {
			t.Fatal(err)
		}
	}
	rows, out := tsharkFields(t, tshark, closeCapture(), "metaroce.coalesced", "metaroce.opcode", "metaroce.psn",
		"metaroce.payload_len", "_ws.expert.message")
	if len(rows) != 2 {
		t.Fatalf("%d datagrams decoded, want 2:\n%s", len(rows), out)
	}
	want := [][]string{
		{"3", "0x03,0x03,0x03", "100,101,102", "64,64,10", ""},
		{"1", "0x03", "200", "64", "Malformed coalesced framing"},
	}
	for i, w := range want {
		for k, v := range w {
			got := rows[i][k]
			if k == 4 && v != "" {
				if !strings.Contains(got, v) {
					t.Errorf("datagram %d: expert info %q, want %q", i, got, v)
				}
				continue
			}
			if got != v {
				t.Errorf("datagram %d field %d: %q, want %q", i, k, got, v)
			}
		}
	}
	t.Logf("tshark:\n%s", out)
}
