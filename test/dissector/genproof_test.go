package dissector

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/engine/pcap"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// TestTsharkShowsGenProof: sequenced packets of a generation the
// receiver has not acknowledged yet carry GEN_PROOF and, in the
// timestamp field, the generation's proof (docs/protocol.md §8.2). The
// dissector shows the flag and the field as the proof, not as a time; a
// packet without the flag keeps its timestamp. The packets are built with
// the core's own header and CRC code into a pcap (engine/pcap) and read
// back by tshark.
func TestTsharkShowsGenProof(t *testing.T) {
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; scripts/install-deps.sh installs it (make deps)")
	w, closeCapture := newCapture(t, "genproof.pcap")
	const proof, stamp = 0x0123456789abcdef, 1_000_000
	type pkt struct {
		op    mr.Opcode
		flags mr.HeaderFlags
		gen   uint16
		ts    uint64
		ext   int
	}
	pkts := []pkt{
		{mr.OpNop, mr.FlagAckReq | mr.FlagGenProof, 3, proof, 0},
		{mr.OpWrite, mr.FlagGenProof | mr.FlagRetransmit, 3, proof, mr.MsgExtLen(mr.OpWrite, 0) + 16},
		{mr.OpWrite, 0, 3, stamp, mr.MsgExtLen(mr.OpWrite, 0) + 16},
	}
	fr := pcap.Frame{SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2}, SrcPort: 40000, DstPort: mr.DefaultUDPPort}
	for i, p := range pkts {
		b := make([]byte, mr.HeaderLen+p.ext+mr.CRCLen)
		h := mr.Header{Opcode: p.op, Flags: p.flags, DstConn: 7, SrcConn: 9, Incarnation: 11, Path: 2, PathGen: p.gen, PSN: mr.PSN(100 + i)}
		h.Put(b)
		binary.BigEndian.PutUint64(b[24:], p.ts)
		if p.ext > 0 {
			(&mr.MsgHeader{PayloadLen: 16, MsgLen: 16}).Put(mr.OpWrite, 0, b[mr.HeaderLen:])
		}
		n := mr.SealCRC(b, mr.HeaderLen+p.ext)
		if err := w.WriteUDP(int64(i+1)*1000, fr, b[:n]); err != nil {
			t.Fatal(err)
		}
	}
	capFile := closeCapture()
	rows, out := tsharkFields(t, tshark, capFile,
		"metaroce.opcode", "metaroce.flags.gen_proof", "metaroce.gen_proof", "metaroce.timestamp", "_ws.col.Info")
	if len(rows) != len(pkts) {
		t.Fatalf("%d packets decoded, want %d:\n%s", len(rows), len(pkts), out)
	}
	for i, f := range rows {
		r := strings.Join(f, "|")
		proven := pkts[i].flags&mr.FlagGenProof != 0
		if tsharkTrue(f[1]) != proven {
			t.Errorf("packet %d: GEN_PROOF %q, want %v (%s)", i, f[1], proven, r)
		}
		if proven {
			if v, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64); err != nil || v != proof || f[3] != "" {
				t.Errorf("packet %d: proof %q timestamp %q, want proof %#x and no timestamp (%s)", i, f[2], f[3], uint64(proof), r)
			}
			if !strings.Contains(f[4], "gen 3 (proof)") {
				t.Errorf("packet %d: info %q does not say it proves generation 3", i, f[4])
			}
		} else if f[2] != "" || f[3] != strconv.Itoa(stamp) {
			t.Errorf("packet %d: proof %q timestamp %q, want no proof and timestamp %d (%s)", i, f[2], f[3], stamp, r)
		}
	}
	t.Logf("tshark:\n%s", out)
}
