package sim_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/internal/golden"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/rocev2"
)

// v1Overhead is what every data packet of wire version 1 carried above
// UDP: the 32-byte header, the 40-byte message extension and the CRC.
// Version 1 is no longer spoken (docs/protocol.md §2); the figure stays
// for the comparison.
const v1Overhead = 32 + 40 + 4

// wireFrame is what a packet costs the wire beside its transport bytes:
// Ethernet header and FCS, IPv4, UDP, preamble and inter-frame gap.
const wireFrame = 14 + 4 + 20 + 8 + 8 + 12

// TestWireOverheadTable renders the bytes each data packet carries above
// UDP, for RoCEv2 (BTH, its extension headers, ICRC) and metaroce
// (header, message extension of wire version 2, CRC), from the
// encoders' own lengths, into the golden table docs/protocol.md quotes.
func TestWireOverheadTable(t *testing.T) {
	ro := func(op rocev2.Opcode) int { return rocev2.HeaderLen(op) + rocev2.ICRCLen }
	v2 := func(op mr.Opcode, f mr.HeaderFlags) int { return mr.HeaderLen + mr.MsgExtLen(op, f) + mr.CRCLen }
	rows := []struct {
		what   string
		rocev2 int
		v2     int
	}{
		{"WRITE, first packet of several", ro(rocev2.OpWriteFirst), v2(mr.OpWrite, 0)},
		{"WRITE, middle or last packet", ro(rocev2.OpWriteMiddle), v2(mr.OpWrite, 0)},
		{"WRITE, one-packet message", ro(rocev2.OpWriteOnly), v2(mr.OpWrite, mr.FlagSolo)},
		{"WRITE_IMM, last packet", ro(rocev2.OpWriteLastImm), v2(mr.OpWriteImm, 0)},
		{"WRITE_IMM, one-packet message", ro(rocev2.OpWriteOnlyImm), v2(mr.OpWriteImm, mr.FlagSolo)},
		{"SEND, packet of several", ro(rocev2.OpSendMiddle), v2(mr.OpSend, 0)},
		{"SEND, one-packet message", ro(rocev2.OpSendOnly), v2(mr.OpSend, mr.FlagSolo)},
		{"SEND_IMM, one-packet message", ro(rocev2.OpSendOnlyImm), v2(mr.OpSendImm, mr.FlagSolo)},
		{"READ request", ro(rocev2.OpReadRequest), v2(mr.OpReadReq, 0)},
		{"READ response, middle packet", ro(rocev2.OpReadResponseMid), v2(mr.OpReadResp, 0)},
		{"READ response, first or last packet", ro(rocev2.OpReadResponseLast), v2(mr.OpReadResp, 0)},
		{"READ response, one-packet READ", ro(rocev2.OpReadResponseOnly), v2(mr.OpReadResp, mr.FlagSolo)},
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "| data packet | RoCEv2 | metaroce v1 | metaroce v2 | v2 − RoCEv2 |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	for _, r := range rows {
		if r.rocev2 < 16 || r.v2 <= mr.HeaderLen+mr.CRCLen || r.v2 > v1Overhead {
			t.Fatalf("%s: RoCEv2 %d, v2 %d bytes: not a data packet's overhead", r.what, r.rocev2, r.v2)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %+d |\n", r.what, r.rocev2, v1Overhead, r.v2, r.v2-r.rocev2)
	}
	// A bulk transfer is made of middle WRITE packets: what a 4 KiB
	// payload costs on the wire.
	const payload = 4096
	roW, v1W, v2W := wireFrame+ro(rocev2.OpWriteMiddle)+payload, wireFrame+v1Overhead+payload, wireFrame+mr.FullWriteLen(payload)
	fmt.Fprintf(&b, "| on the wire per %d-byte payload, middle WRITE (with %d bytes of Ethernet, IPv4, UDP, preamble and gap) | %d | %d (%+.2f%%) | %d (%+.2f%%) | %+d |\n",
		payload, wireFrame, roW, v1W, 100*float64(v1W-roW)/float64(roW), v2W, 100*float64(v2W-roW)/float64(roW), v2W-roW)
	golden.File(t, filepath.Join("testdata", "wire-overhead.md"), b.Bytes())
}
