package dissector

import (
	"strconv"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/engine/pcap"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// TestTsharkDecodesMessageForms: one packet of every form of version 2's
// message extension (each data opcode, with and without SOLO, READ_RESP
// with STATUS), built with the core's own encoders into a pcap, read back
// by tshark. Each field the form carries shows its value, each one it
// leaves out is absent, the payload length is the datagram's, and a
// version 1 packet is flagged as one receivers drop.
func TestTsharkDecodesMessageForms(t *testing.T) {
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; scripts/install-deps.sh installs it (make deps)")
	w, closeCapture := newCapture(t, "forms.pcap")
	type form struct {
		op      mr.Opcode
		f       mr.HeaderFlags
		payload int
	}
	forms := []form{
		{mr.OpWrite, 0, 100}, {mr.OpWrite, mr.FlagSolo, 100},
		{mr.OpWriteImm, 0, 100}, {mr.OpWriteImm, mr.FlagSolo, 100},
		{mr.OpSend, 0, 100}, {mr.OpSend, mr.FlagSolo, 64},
		{mr.OpSendImm, 0, 100}, {mr.OpSendImm, mr.FlagSolo, 0},
		{mr.OpReadReq, 0, 0},
		{mr.OpReadResp, 0, 100}, {mr.OpReadResp, mr.FlagSolo, 100}, {mr.OpReadResp, mr.FlagStatus, 0},
	}
	fr := pcap.Frame{SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2}, SrcPort: 40000, DstPort: mr.DefaultUDPPort}
	want := make([]mr.MsgHeader, len(forms))
	for i, fm := range forms {
		m := mr.MsgHeader{Stream: 5, PayloadLen: uint16(fm.payload), MsgSeq: mr.MsgSeq(1000 + i), Offset: 4096, MsgLen: 10000}
		if fm.op == mr.OpWriteImm || fm.op == mr.OpSend || fm.op == mr.OpSendImm {
			m.RecvSeq = 77
		}
		if fm.op == mr.OpWrite || fm.op == mr.OpWriteImm || fm.op == mr.OpReadReq {
			m.RKey, m.RemoteAddr = 0xabcd, 0x10000
		}
		if fm.op == mr.OpWriteImm || fm.op == mr.OpSendImm || fm.f&mr.FlagStatus != 0 {
			m.Imm = 2
		}
		if fm.op == mr.OpReadReq {
			m.Offset = 0
		}
		if fm.f&mr.FlagSolo != 0 {
			m.Offset, m.MsgLen = 0, uint32(fm.payload)
		}
		if got := m.Flags(fm.op); got != fm.f {
			t.Fatalf("form %d: the encoder picks flags %#x, want %#x", i, got, fm.f)
		}
		want[i] = m
		ext := mr.MsgExtLen(fm.op, fm.f)
		b := make([]byte, mr.HeaderLen+ext+fm.payload+mr.CRCLen)
		h := mr.Header{Opcode: fm.op, Flags: fm.f, DstConn: 7, SrcConn: 9, Incarnation: 11, Path: 2, PSN: mr.PSN(100 + i), Timestamp: 5}
		h.Put(b)
		m.Put(fm.op, fm.f, b[mr.HeaderLen:])
		n := mr.SealCRC(b, mr.HeaderLen+ext+fm.payload)
		if err := w.WriteUDP(int64(i+1)*1000, fr, b[:n]); err != nil {
			t.Fatal(err)
		}
	}
	// A version 1 NOP: shown, and flagged.
	v1 := make([]byte, mr.HeaderLen+mr.CRCLen)
	(&mr.Header{Opcode: mr.OpNop, DstConn: 7}).Put(v1)
	v1[0] = 1
	if err := w.WriteUDP(int64(len(forms)+1)*1000, fr, v1[:mr.SealCRC(v1, mr.HeaderLen)]); err != nil {
		t.Fatal(err)
	}
	capFile := closeCapture()
	names := []string{"metaroce.stream", "metaroce.msg_seq", "metaroce.recv_seq", "metaroce.offset", "metaroce.msg_len",
		"metaroce.rkey", "metaroce.remote_addr", "metaroce.imm", "metaroce.payload_len", "metaroce.flags.solo", "metaroce.flags.status",
		"_ws.expert.message"}
	rows, out := tsharkFields(t, tshark, capFile, names...)
	if len(rows) != len(forms)+1 {
		t.Fatalf("%d packets decoded, want %d:\n%s", len(rows), len(forms)+1, out)
	}
	hexOrDec := func(s string) string {
		if v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64); err == nil && strings.HasPrefix(s, "0x") {
			return strconv.FormatUint(v, 10)
		}
		return s
	}
	checked := 0
	for i, fm := range forms {
		f := rows[i]
		m := want[i]
		carries := map[string]bool{
			"recv_seq":    fm.op == mr.OpWriteImm || fm.op == mr.OpSend || fm.op == mr.OpSendImm,
			"offset":      fm.op != mr.OpReadReq && fm.f&mr.FlagSolo == 0,
			"msg_len":     fm.f&mr.FlagSolo == 0,
			"rkey":        fm.op == mr.OpWrite || fm.op == mr.OpWriteImm || fm.op == mr.OpReadReq,
			"remote_addr": fm.op == mr.OpWrite || fm.op == mr.OpWriteImm || fm.op == mr.OpReadReq,
			"imm":         fm.op == mr.OpWriteImm || fm.op == mr.OpSendImm || fm.f&mr.FlagStatus != 0,
		}
		expect := map[string]string{
			"stream": "5", "msg_seq": strconv.Itoa(int(m.MsgSeq)), "recv_seq": strconv.Itoa(int(m.RecvSeq)),
			"offset": strconv.Itoa(int(m.Offset)), "msg_len": strconv.Itoa(int(m.MsgLen)), "rkey": strconv.Itoa(int(m.RKey)),
			"remote_addr": strconv.FormatUint(m.RemoteAddr, 10), "imm": strconv.Itoa(int(m.Imm)), "payload_len": strconv.Itoa(fm.payload),
		}
		for k, n := range names[:9] {
			key := strings.TrimPrefix(n, "metaroce.")
			got := hexOrDec(f[k])
			c, listed := carries[key]
			if listed && !c {
				if got != "" {
					t.Errorf("%v flags %#x: %s = %q, want it absent", fm.op, fm.f, key, got)
				}
				continue
			}
			if got != expect[key] {
				t.Errorf("%v flags %#x: %s = %q, want %s", fm.op, fm.f, key, got, expect[key])
			}
			checked++
		}
		if tsharkTrue(f[9]) != (fm.f&mr.FlagSolo != 0) || tsharkTrue(f[10]) != (fm.f&mr.FlagStatus != 0) {
			t.Errorf("%v flags %#x: SOLO %q STATUS %q", fm.op, fm.f, f[9], f[10])
		}
		if f[11] != "" {
			t.Errorf("%v flags %#x: expert info %q on a well-formed packet", fm.op, fm.f, f[11])
		}
	}
	if last := rows[len(forms)]; !strings.Contains(last[11], "Not version 2") {
		t.Errorf("a version 1 packet is not flagged: %q", strings.Join(last, "|"))
	}
	if checked < 5*len(forms) {
		t.Fatalf("checked %d fields, want at least %d", checked, 5*len(forms))
	}
	t.Logf("tshark:\n%s", out)
}
