// Package rocev2conformance checks the RoCEv2 baseline's wire format
// against two independent implementations: Wireshark's RRoCE dissector
// (tshark) and scapy's ICRC (scapy.contrib.roce). Both come from Debian
// packages that scripts/install-deps.sh installs (tshark, python3-scapy);
// the test skips, saying why, when either is missing.
package rocev2conformance

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/rocev2"
)

// python is Debian's interpreter, where python3-scapy installs scapy.
const python = "/usr/bin/python3"

func requireTools(t *testing.T) string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (Debian package tshark; run scripts/install-deps.sh)")
	}
	if err := exec.Command(python, "-c", "import scapy.contrib.roce").Run(); err != nil {
		t.Skipf("%s cannot import scapy.contrib.roce (Debian package python3-scapy; run scripts/install-deps.sh): %v", python, err)
	}
	return tshark
}

// TestWireConformance captures a RoCEv2 exchange with every packet kind
// (CM, WRITE, SEND, READ request and responses, ACK, NAK, RNR NAK, CNP),
// writes it as a pcap and checks that
//
//   - tshark decodes every frame as eth:ip:udp:infiniband (RRoCE), with the
//     opcode, destination QP, PSN, AETH syndrome and ICRC we wrote, and
//     reports no malformed packet and no expert info at all;
//   - scapy computes, for every frame, the ICRC the frame carries.
//
// tshark 4.0 has no CNP dissector: it shows opcode 0x81 as "Unknown" with
// the reserved bytes as vendor data, which is checked to be exactly that.
func TestWireConformance(t *testing.T) {
	tshark := requireTools(t)
	frames := capture(t)
	path := filepath.Join(t.TempDir(), "rocev2.pcap")
	writePcap(t, path, frames)

	// Every kind of packet is in the capture.
	kinds := map[string]bool{}
	for _, f := range frames {
		var p rocev2.Packet
		require.NoError(t, p.Decode(f.payload))
		k := p.BTH.Opcode.String()
		if p.BTH.Opcode == rocev2.OpAcknowledge {
			k = fmt.Sprintf("Acknowledge %#x", uint8(p.AETH.Syndrome)&0xE0)
		}
		kinds[k] = true
	}
	for _, k := range []string{
		"UD SEND Only", "RDMA WRITE First", "RDMA WRITE Middle", "RDMA WRITE Last", "RDMA WRITE Only",
		"RDMA WRITE Last with Immediate", "RDMA WRITE Only with Immediate", "SEND First", "SEND Middle", "SEND Last",
		"SEND Last with Immediate", "SEND Only", "SEND Only with Immediate", "RDMA READ Request",
		"RDMA READ Response First", "RDMA READ Response Middle", "RDMA READ Response Last", "RDMA READ Response Only",
		"Acknowledge 0x0", "Acknowledge 0x60", "Acknowledge 0x20", "CNP",
	} {
		require.True(t, kinds[k], "the capture has no %s", k)
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tshark, append([]string{"-r", path, "-d", "udp.port==4791,infiniband"}, args...)...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		require.NoError(t, err, "tshark %v: %s", args, out)
		return string(out)
	}
	// No malformed packet, no expert info of any severity.
	require.Empty(t, strings.TrimSpace(run("-Y", "_ws.malformed or _ws.expert")))

	out := run("-T", "fields", "-E", "separator=|", "-e", "frame.number", "-e", "frame.protocols",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
		"-e", "infiniband.aeth.syndrome", "-e", "infiniband.invariant.crc", "-e", "infiniband.vendor")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(frames))
	for i, line := range lines {
		f := strings.Split(line, "|")
		require.Len(t, f, 8, line)
		var p rocev2.Packet
		require.NoError(t, p.Decode(frames[i].payload))
		// RRoCE, with the payload (if any) shown as data.
		require.Contains(t, []string{"eth:ethertype:ip:udp:infiniband", "eth:ethertype:ip:udp:infiniband:data"}, f[1],
			"frame %d is not RRoCE: %s", i+1, line)
		require.Equal(t, strconv.Itoa(int(p.BTH.Opcode)), f[2], "frame %d opcode", i+1)
		require.Equal(t, p.BTH.DestQP, parseUint(t, f[3]), "frame %d destination QP", i+1)
		require.Equal(t, uint32(p.BTH.PSN), parseUint(t, f[4]), "frame %d PSN", i+1)
		if p.BTH.Opcode == rocev2.OpAcknowledge {
			require.Equal(t, uint32(p.AETH.Syndrome), parseUint(t, f[5]), "frame %d syndrome", i+1)
		}
		icrc := frames[i].payload[len(frames[i].payload)-4:]
		if p.BTH.Opcode == rocev2.OpCNP {
			require.Empty(t, f[6])
			require.True(t, p.BTH.BECN)
			// The vendor-data tree's innermost item holds the body.
			vendor := strings.Split(f[7], ",")
			require.Equal(t, strings.Repeat("00", 16)+fmt.Sprintf("%x", icrc), strings.ReplaceAll(vendor[len(vendor)-1], ":", ""), "frame %d: CNP body", i+1)
			continue
		}
		// Wireshark shows the ICRC as the four bytes read big-endian.
		require.Equal(t, binary.BigEndian.Uint32(icrc), parseUint(t, f[6]), "frame %d ICRC field", i+1)
	}

	// scapy's ICRC for every frame.
	script, err := filepath.Abs("icrc_check.py")
	require.NoError(t, err)
	cmd := exec.Command(python, script, path)
	res, err := cmd.CombinedOutput()
	require.NoError(t, err, "scapy ICRC check failed:\n%s", res)
	require.Contains(t, string(res), fmt.Sprintf("checked %d packets, 0 mismatches", len(frames)))
	t.Logf("%d frames: tshark decodes all as RRoCE, scapy agrees on every ICRC", len(frames))
}

func parseUint(t *testing.T, s string) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 0, 32)
	if strings.HasPrefix(s, "0x") {
		v, err = strconv.ParseUint(s[2:], 16, 32)
	}
	require.NoError(t, err, "%q", s)
	return uint32(v)
}
