package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const tinyExperiment = `
experiment: tiny
duration: 400us
warmup: 50us
topology: {leaves: 2, hosts_per_leaf: 1, spines: 2, ecn: {mode: step, k: 1KiB}}
workload: {kind: long-lived, connections: 2}
sweep:
  loss.rate: [0, 0.01]
report:
  plots:
    - {kind: line, x: loss.rate, y: goodput_gbps, series: [transport]}
    - {name: t, kind: series, y: goodput_gbps}
`

func writeTiny(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "tiny.yaml")
	require.NoError(t, os.WriteFile(f, []byte(tinyExperiment), 0o644))
	return f
}

func execute(t *testing.T, args ...string) (string, string, error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

func TestSimJSON(t *testing.T) {
	out, stderr, err := execute(t, "sim", writeTiny(t), "--json")
	require.NoError(t, err)
	require.Empty(t, stderr, "no progress bar when stderr is not a terminal")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, "2 transports x 2 loss rates:\n%s", out)
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		for _, k := range []string{"experiment", "transport", "loss.rate", "goodput_gbps", "link_gbps", "efficiency"} {
			require.Contains(t, m, k)
		}
		require.Equal(t, "tiny", m["experiment"])
	}
}

func TestSimTableAndOut(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := execute(t, "sim", writeTiny(t), "--out", dir)
	require.NoError(t, err)
	require.Contains(t, out, "goodput_gbps")
	require.Contains(t, out, "metaroce")
	require.Contains(t, stderr, "wrote")
	for _, f := range []string{"tiny.csv", "tiny-series.csv", "tiny.jsonl", "tiny.png", "tiny-t.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		require.Greater(t, st.Size(), int64(50), f)
	}
}

func TestSimSetErrors(t *testing.T) {
	_, _, err := execute(t, "sim", writeTiny(t), "--set", "loss.rat=0.1")
	require.ErrorContains(t, err, `unknown key "rat" in loss`)
	_, _, err = execute(t, "sim", writeTiny(t), "--set", "loss.rate=0.02", "--json")
	require.NoError(t, err)
	_, _, err = execute(t, "sim", "/nonexistent.yaml")
	require.Error(t, err)
}

// --pcap writes a pcap of one host's NIC: nanosecond pcap header,
// Ethernet/IPv4/UDP frames to the transport's port, ECT(0) or CE in the IP
// header, valid IPv4 checksums.
func TestSimPcap(t *testing.T) {
	dir := t.TempDir()
	pc := filepath.Join(dir, "x.pcap")
	exp := filepath.Join(dir, "incast.yaml")
	// Two senders into host 1's port build a queue above K: marks.
	require.NoError(t, os.WriteFile(exp, []byte(`
duration: 400us
topology: {leaves: 1, hosts_per_leaf: 3, spines: 1, ecn: {mode: step, k: 1KiB}}
workload: {kind: incast, senders: 2}
transports: [metaroce]
pcap: {host: 2, max_packets: 500}
`), 0o644))
	_, stderr, err := execute(t, "sim", exp, "--pcap", pc, "--pcap-host", "0")
	require.NoError(t, err)
	require.Contains(t, stderr, "500 packets")
	b, err := os.ReadFile(pc)
	require.NoError(t, err)
	require.Equal(t, uint32(0xa1b23c4d), binary.LittleEndian.Uint32(b))
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(b[20:]))
	off := 24
	n, ce := 0, 0
	for off+16 <= len(b) {
		incl := int(binary.LittleEndian.Uint32(b[off+8:]))
		f := b[off+16 : off+16+incl]
		off += 16 + incl
		n++
		require.Equal(t, uint16(0x0800), binary.BigEndian.Uint16(f[12:]))
		ip := f[14:34]
		require.Equal(t, byte(0x45), ip[0])
		require.Equal(t, byte(17), ip[9])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		require.Equal(t, uint32(0xffff), sum, "IPv4 header checksum")
		ecn := ip[1] & 3
		require.True(t, ecn == 2 || ecn == 3, "ECT(0) or CE")
		if ecn == 3 {
			ce++
		}
		src, dst := binary.BigEndian.Uint32(ip[12:]), binary.BigEndian.Uint32(ip[16:])
		require.True(t, src == 0x0a000001 || dst == 0x0a000001, "host 0 is 10.0.0.1 on plane 0")
		require.Equal(t, uint16(4794), binary.BigEndian.Uint16(f[36:]))
	}
	require.Equal(t, 500, n)
	require.Greater(t, ce, 0, "with K = 1 KiB some packets are marked")
}

// A bad experiment file or --set is a configuration error: exit status 2,
// one line naming the key and the file.
func TestSimConfigErrorExitCode(t *testing.T) {
	if got := run([]string{"sim", "../../configs/experiments/incast.yaml", "--set", "nosuch=1"}); got != exitUsage {
		t.Fatalf("unknown key: exit %d, want %d", got, exitUsage)
	}
	if got := run([]string{"sim", "/nonexistent.yaml"}); got != exitUsage {
		t.Fatalf("missing file: exit %d, want %d", got, exitUsage)
	}
}
