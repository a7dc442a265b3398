// Package rocev2conformance checks the RoCEv2 baseline's wire format
// against two independent implementations: Wireshark's RRoCE dissector
// (tshark) and scapy's ICRC (scapy.contrib.roce). Both come from Debian
// packages that scripts/install-deps.sh installs (tshark, python3-scapy);
// the tests skip, saying why, when either is missing.
//
// The capture checked is what a user gets: TestSimCaptureConformance
// builds the metaroce command and runs
//
//	metaroce sim configs/experiments/rocev2-capture.yaml --pcap FILE
//
// (a lossy, ECN-marking RoCEv2 run whose workload rotates WRITE,
// WRITE_IMM, SEND, SEND_IMM and READ), then checks FILE. The one packet
// kind a simulator run cannot produce — an RNR NAK: the simulator's
// applications keep receives posted — comes from a scripted exchange over
// the in-memory pair (TestRNRNakConformance, capture_test.go), checked the
// same way.
package rocev2conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/engine/pcap"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// python is Debian's interpreter, where python3-scapy installs scapy.
const python = "/usr/bin/python3"

// moduleRoot is the module's root directory, relative to this package's
// directory (where go test runs the test).
const moduleRoot = "../.."

func requireTools(t *testing.T) string {
	t.Helper()
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; run scripts/install-deps.sh")
	if err := exec.Command(python, "-c", "import scapy.contrib.roce").Run(); err != nil {
		testenv.Unavailable(t, "%s cannot import scapy.contrib.roce (Debian package python3-scapy; run scripts/install-deps.sh): %v", python, err)
	}
	return tshark
}

// TestSimCaptureConformance runs `metaroce sim --pcap` on
// configs/experiments/rocev2-capture.yaml with a freshly built binary and
// checks the capture (see checkCapture). The capture must hold at least
// one of every packet kind RoCEv2 data traffic on a lossy, congested
// fabric produces: the CM exchange (UD SEND Only to QP1), RDMA WRITE
// First/Middle/Last/Only with and without immediate, SEND
// First/Middle/Last/Only with and without immediate, READ requests and
// READ responses First/Middle/Last/Only, ACKs, NAKs (PSN sequence error,
// syndrome 0x60) and CNPs (opcode 0x81).
func TestSimCaptureConformance(t *testing.T) {
	tshark := requireTools(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "metaroce")
	build := exec.Command("go", "build", "-o", bin, "./cmd/metaroce")
	build.Dir = moduleRoot
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/metaroce:\n%s", out)

	path := filepath.Join(dir, "rocev2-capture.pcap")
	run := exec.Command(bin, "sim", filepath.Join(moduleRoot, "configs/experiments/rocev2-capture.yaml"), "--pcap", path, "--json")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	require.NoError(t, run.Run(), "metaroce sim: %s", stderr.String())
	m := regexp.MustCompile(`wrote .* \((\d+) packets\)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "metaroce sim did not report the capture: %s", stderr.String())
	wrote, _ := strconv.Atoi(m[1])

	frames, kinds := checkCapture(t, tshark, path)
	require.Len(t, frames, wrote, "frames in the file vs what metaroce sim reported")
	for _, f := range frames {
		// Plane 0 (10.0.x.y): the core's ICRCs are over plane-0 addresses.
		require.Equal(t, byte(0), f.srcIP[1], "frame %d: source %v is not on plane 0", f.n, f.srcIP)
		require.Equal(t, byte(0), f.dstIP[1], "frame %d: destination %v is not on plane 0", f.n, f.dstIP)
	}
	for _, k := range []string{
		"UD SEND Only",
		"RDMA WRITE First", "RDMA WRITE Middle", "RDMA WRITE Last", "RDMA WRITE Only",
		"RDMA WRITE Last with Immediate", "RDMA WRITE Only with Immediate",
		"SEND First", "SEND Middle", "SEND Last", "SEND Only", "SEND Last with Immediate", "SEND Only with Immediate",
		"RDMA READ Request",
		"RDMA READ Response First", "RDMA READ Response Middle", "RDMA READ Response Last", "RDMA READ Response Only",
		"Acknowledge 0x0", "Acknowledge 0x60", "CNP",
	} {
		require.Positive(t, kinds[k], "the capture has no %s (kinds: %v)", k, kinds)
	}
	t.Logf("metaroce sim --pcap: %d frames; tshark decodes all as RRoCE, scapy agrees on every ICRC; kinds %v", len(frames), kinds)
	t.Logf("run: %s", strings.TrimSpace(firstFields(stdout.String())))
}

// firstFields is the JSON row without its time series, for the log.
func firstFields(row string) string {
	if i := strings.Index(row, `,"series"`); i >= 0 {
		return row[:i] + "}"
	}
	return row
}

// capFrame is one frame of a capture file.
type capFrame struct {
	n            int // frame number, from 1 (as tshark counts)
	srcIP, dstIP [4]byte
	payload      []byte // UDP payload: BTH ... ICRC
	pkt          rocev2.Packet
}

// readPcap reads a classic pcap file of Ethernet/IPv4/UDP frames (what
// engine/pcap and metaroce sim write). Every frame must be whole (a
// truncated frame loses its ICRC) and go to UDP port 4791.
func readPcap(t *testing.T, path string) []capFrame {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 24, "pcap file header")
	require.Contains(t, []uint32{pcap.MagicNanoseconds, 0xa1b2c3d4}, binary.LittleEndian.Uint32(b), "pcap magic")
	require.Equal(t, uint32(pcap.LinkTypeEthernet), binary.LittleEndian.Uint32(b[20:]), "link type")
	var frames []capFrame
	for off := 24; off < len(b); {
		require.GreaterOrEqual(t, len(b)-off, 16, "record header at %d", off)
		incl := int(binary.LittleEndian.Uint32(b[off+8:]))
		orig := int(binary.LittleEndian.Uint32(b[off+12:]))
		n := len(frames) + 1
		require.Equal(t, orig, incl, "frame %d is truncated (snaplen too small): the ICRC is its last 4 bytes", n)
		off += 16
		require.LessOrEqual(t, incl, len(b)-off, "frame %d runs past the end of the file", n)
		fr := b[off : off+incl]
		off += incl
		require.Greater(t, len(fr), pcap.HeadersLen, "frame %d", n)
		require.Equal(t, []byte{0x08, 0x00}, fr[12:14], "frame %d: not IPv4", n)
		ip := fr[14:34]
		require.Equal(t, byte(0x45), ip[0], "frame %d: IPv4 with options", n)
		require.Equal(t, byte(17), ip[9], "frame %d: not UDP", n)
		require.Equal(t, uint16(rocev2.UDPPort), binary.BigEndian.Uint16(fr[36:38]), "frame %d: UDP destination port", n)
		f := capFrame{n: n, payload: fr[pcap.HeadersLen:]}
		copy(f.srcIP[:], ip[12:16])
		copy(f.dstIP[:], ip[16:20])
		require.NoError(t, f.pkt.Decode(f.payload), "frame %d: our own decoder", n)
		frames = append(frames, f)
	}
	require.NotEmpty(t, frames)
	return frames
}

// kindOf names a packet's kind: its opcode, and for acknowledgements the
// AETH syndrome's type (0x0 ACK, 0x20 RNR NAK, 0x60 NAK).
func kindOf(p *rocev2.Packet) string {
	if p.BTH.Opcode == rocev2.OpAcknowledge {
		return fmt.Sprintf("Acknowledge %#x", uint8(p.AETH.Syndrome)&0xE0)
	}
	return p.BTH.Opcode.String()
}

// checkCapture checks the capture file at path and returns its frames and
// how many of each kind it holds:
//
//   - tshark, with its default settings, decodes every frame as
//     eth:ip:udp:infiniband (RRoCE), with the opcode, destination QP, PSN,
//     AETH syndrome and ICRC the frame carries, and reports no malformed
//     packet and no expert info at all;
//   - scapy computes, for every frame, the ICRC the frame carries.
//
// tshark 4.0 has no CNP dissector: it shows opcode 0x81 as "Unknown" with
// the 16 reserved bytes and the ICRC as vendor data, which is checked to
// be exactly that.
func checkCapture(t *testing.T, tshark, path string) ([]capFrame, map[string]int) {
	t.Helper()
	frames := readPcap(t, path)
	kinds := map[string]int{}
	for i := range frames {
		kinds[kindOf(&frames[i].pkt)]++
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tshark, append([]string{"-r", path}, args...)...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		require.NoError(t, err, "tshark %v: %s", args, out)
		return string(out)
	}
	// No malformed packet, no expert info of any severity.
	require.Empty(t, strings.TrimSpace(run("-Y", "_ws.malformed or _ws.expert")), "tshark: malformed packets or expert info")

	out := run("-T", "fields", "-E", "separator=|", "-e", "frame.number", "-e", "frame.protocols",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
		"-e", "infiniband.aeth.syndrome", "-e", "infiniband.invariant.crc", "-e", "infiniband.vendor")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(frames))
	for i, line := range lines {
		f := strings.Split(line, "|")
		require.Len(t, f, 8, line)
		fr := &frames[i]
		p := &fr.pkt
		require.Equal(t, strconv.Itoa(fr.n), f[0], line)
		// RRoCE; the payload, if any, shown as data or offered to the
		// dissectors that run over InfiniBand (Wireshark's RPC-over-RDMA
		// heuristic takes some SENDs of zero bytes for its fragments).
		require.True(t, f[1] == "eth:ethertype:ip:udp:infiniband" || strings.HasPrefix(f[1], "eth:ethertype:ip:udp:infiniband:"),
			"frame %d is not RRoCE: %s", fr.n, line)
		require.Equal(t, strconv.Itoa(int(p.BTH.Opcode)), f[2], "frame %d opcode", fr.n)
		require.Equal(t, p.BTH.DestQP, parseUint(t, f[3]), "frame %d destination QP", fr.n)
		require.Equal(t, uint32(p.BTH.PSN), parseUint(t, f[4]), "frame %d PSN", fr.n)
		if p.BTH.Opcode == rocev2.OpAcknowledge {
			require.Equal(t, uint32(p.AETH.Syndrome), parseUint(t, f[5]), "frame %d syndrome", fr.n)
		}
		icrc := fr.payload[len(fr.payload)-4:]
		if p.BTH.Opcode == rocev2.OpCNP {
			require.Empty(t, f[6])
			require.True(t, p.BTH.BECN)
			// The vendor-data tree's innermost item holds the body.
			vendor := strings.Split(f[7], ",")
			require.Equal(t, strings.Repeat("00", 16)+fmt.Sprintf("%x", icrc), strings.ReplaceAll(vendor[len(vendor)-1], ":", ""), "frame %d: CNP body", fr.n)
			continue
		}
		// Wireshark shows the ICRC as the four bytes read big-endian.
		require.Equal(t, binary.BigEndian.Uint32(icrc), parseUint(t, f[6]), "frame %d ICRC field", fr.n)
	}

	// scapy's ICRC for every frame.
	script, err := filepath.Abs("icrc_check.py")
	require.NoError(t, err)
	res, err := exec.Command(python, script, path).CombinedOutput()
	require.NoError(t, err, "scapy ICRC check failed:\n%s", res)
	require.Contains(t, string(res), fmt.Sprintf("checked %d packets, 0 mismatches", len(frames)))
	return frames, kinds
}

func parseUint(t *testing.T, s string) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 32)
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		v, err = strconv.ParseUint(h, 16, 32)
	}
	require.NoError(t, err, "%q", s)
	return uint32(v)
}
