//go:build dpdk

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// The cell harness (scripts/dpdk-cells.sh, make bench-cells) in its tiny
// mode: one 1 s run of each of the four cells over a memif pair, metaroce
// by the harness's own column and the RoCEv2 baseline through --other (the
// harness's adapter as the other command), so both the built-in path and
// the --other contract run. The test reads the one table the harness
// prints: every cell must hold a number or an explicit FAIL with its
// reason listed; the figures themselves are benchmarks, not checked here.

var (
	// A measured cell: a number with its unit, and "(k/n FAIL [i])" when
	// some of its runs failed.
	cellNum  = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?)( K| M| Gb/s)?( \([0-9]+/[0-9]+ FAIL \[([0-9]+)\]\))?$`)
	cellRTT  = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?) / ([0-9]+(\.[0-9]+)?) us( \([0-9]+/[0-9]+ FAIL \[([0-9]+)\]\))?$`)
	cellFail = regexp.MustCompile(`^FAIL \[([0-9]+)\]$`)
	// kernelDrop is the header line of an af_packet table.
	kernelDrop = regexp.MustCompile(`(?m)^af_packet: kernel receive on the veths: dropped at ingress, ([0-9]+) frames$`)
)

func TestDPDKCellsHarnessTiny(t *testing.T) {
	bin := binary.Build(t)
	for _, tool := range []string{"taskset", "timeout", "setsid"} {
		testenv.Tool(t, tool, "Debian package util-linux / coreutils")
	}
	script := cellsScript(t)
	other := script + " --adapter rocev2 {role} {size} {outstanding} {duration} {backend} {core} {sock} {iface} {ip} {peer_ip} {port} {prefix} " + bin + " off"
	start := time.Now()
	table := runCells(t, "--tiny", "--huge", "off", "--bin", bin, "--transports", "metaroce",
		"--other", other, "--other-name", "rocev2")

	var header []string
	var rows [][]string
	notes := map[string]bool{}
	mtuLine, corelatLine, first := false, false, true
	for _, l := range strings.Split(table, "\n") {
		switch {
		case strings.HasPrefix(l, "MTU "):
			mtuLine = l == "MTU 1024 (payload bytes per data packet of the built-in columns)"
		case strings.HasPrefix(l, "core-to-core latency around each run"):
			corelatLine = true
		case strings.HasPrefix(l, "| cell |") && first:
			header = cells(l)
		case strings.HasPrefix(l, "| ") && header != nil && first:
			rows = append(rows, cells(l))
		case l == "" && len(rows) > 0:
			// The first table is all runs; a second one (near-core
			// runs only) may follow when the cores moved.
			first = false
		case strings.HasPrefix(l, "["):
			if i := strings.Index(l, "]"); i > 0 {
				notes[l[1:i]] = true
			}
		}
	}
	wantHeader := []string{"cell", "metaroce memif", "rocev2 memif", "metaroce/rocev2 memif"}
	if !mtuLine {
		t.Errorf("the table does not say its MTU (1024 by default):\n%s", table)
	}
	if !corelatLine {
		t.Errorf("the table does not give the cores' cache-line latency around the runs:\n%s", table)
	}
	if strings.Join(header, "|") != strings.Join(wantHeader, "|") {
		t.Fatalf("header %q, want %q", header, wantHeader)
	}
	wantRows := []string{"64 B ping-pong, round trips/s", "64 B ping-pong RTT p50 / p99.9",
		"64 B, 32 outstanding, messages/s", "32 KiB, 8 outstanding", "1 MiB, 2 outstanding"}
	if len(rows) != len(wantRows) {
		t.Fatalf("%d rows, want %d", len(rows), len(wantRows))
	}
	checked, failed := 0, 0
	for i, r := range rows {
		if len(r) != len(header) || r[0] != wantRows[i] {
			t.Fatalf("row %d: %q", i, r)
		}
		for j, c := range r[1:3] {
			re := cellNum
			if i == 1 {
				re = cellRTT
			}
			var ref string
			if m := cellFail.FindStringSubmatch(c); m != nil {
				ref = m[1]
				failed++
			} else if m := re.FindStringSubmatch(c); m != nil {
				if v, _ := strconv.ParseFloat(m[1], 64); !(v > 0) {
					t.Errorf("%s, %s: %q is not a positive figure", r[0], header[j+1], c)
				}
				ref = m[len(m)-1]
			} else {
				t.Errorf("%s, %s: %q is neither a figure nor FAIL [n]", r[0], header[j+1], c)
				continue
			}
			if ref != "" && !notes[ref] {
				t.Errorf("%s, %s: %q refers to note [%s], which the table lacks", r[0], header[j+1], c, ref)
			}
			checked++
		}
		// The ratio: a number, or "-" when either side failed every run.
		if _, err := strconv.ParseFloat(r[3], 64); err != nil && r[3] != "-" {
			t.Errorf("%s: ratio %q", r[0], r[3])
		}
	}
	if checked != 2*len(wantRows) {
		t.Fatalf("checked %d cells, want %d", checked, 2*len(wantRows))
	}
	if failed > 0 {
		t.Logf("%d cell(s) failed in every run (reported as such)", failed)
	}
	// The harness leaves no EAL runtime directory of its own behind.
	if m, _ := filepath.Glob("/var/run/dpdk/mrcells*"); len(m) > 0 {
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.ModTime().After(start) {
				t.Errorf("left behind: %s", d)
			}
		}
	}
}

// cellsScript is the harness's absolute path.
func cellsScript(t *testing.T) string {
	script, err := filepath.Abs("../../scripts/dpdk-cells.sh")
	if err != nil {
		t.Fatal(err)
	}
	return script
}

// runCells runs the harness with args, bounded at 55 s (then SIGTERM, so
// that it removes what it started), and returns the table it printed,
// logged with the time it took; a non-zero exit fails the test.
func runCells(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cellsScript(t), args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v after %v\nstdout:\n%s\nstderr:\n%s", err, time.Since(start), out, stderr.String())
	}
	t.Logf("harness took %v:\n%s", time.Since(start).Round(time.Second), out)
	return string(out)
}

// TestDPDKCellsHarnessRejectsBadOptions: an option out of range stops the
// harness before it starts anything, with exit status 2 and a message
// that names the option.
func TestDPDKCellsHarnessRejectsBadOptions(t *testing.T) {
	script := cellsScript(t)
	for _, c := range []struct{ args, want string }{
		{"--mtu 100", "--mtu 100: want an integer from 256 to 9000"},
		{"--mtu 9001", "--mtu 9001: want an integer from 256 to 9000"},
		{"--mtu jumbo", "--mtu jumbo: want an integer"},
		{"--runs 0", "--runs 0: want a positive integer"},
		{"--kernel-rx maybe", "--kernel-rx maybe: want on or off"},
	} {
		cmd := exec.Command(script, append(strings.Fields(c.args), "--bin", "/bin/true")...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: %v, want exit status 2\n%s", c.args, err, out)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %q lacks %q", c.args, out, c.want)
		}
	}
}

// cells splits a Markdown table row into its trimmed cells.
func cells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// TestDPDKCellsHarnessJumboAfPacket: one 1 s run of the 1 MiB cell at
// MTU 8192 over af_packet on the harness's veth pair. Frames over 2 KiB
// need af_packet frames that fit an mbuf and whole-page blocks; with
// frames sized past the mbufs, DPDK refused the queue ("rx queue setup:
// Cannot allocate memory") and every run failed before it started. The
// cell must hold a figure; a failed run's reason is reported, and one
// that never got a server up fails the test whatever the load. The
// kernel's own receive on the veths is off by default (an nftables
// ingress drop): the header must say how many frames it dropped, and a
// run that moved 1 MiB messages dropped some.
func TestDPDKCellsHarnessJumboAfPacket(t *testing.T) {
	testenv.Root(t, "the harness builds a network namespace with a veth pair")
	bin := binary.Build(t)
	for _, tool := range []string{"taskset", "timeout", "setsid", "ip", "nft"} {
		testenv.Tool(t, tool, "Debian packages util-linux / coreutils / iproute2 / nftables")
	}
	table := runCells(t, "--runs", "1", "--duration", "1", "--huge", "off", "--bin", bin,
		"--transports", "metaroce", "--backends", "af_packet", "--cells", "g1m", "--mtu", "8192")
	if !strings.Contains(table, "MTU 8192 ") {
		t.Errorf("the table does not say MTU 8192")
	}
	if m := kernelDrop.FindStringSubmatch(table); m == nil {
		t.Errorf("the table does not say how many frames the kernel's ingress drop took:\n%s", table)
	} else if n, _ := strconv.Atoi(m[1]); n <= 0 {
		t.Errorf("the kernel's ingress drop counted %d frames: the frames went past it, or the chain is not on the veths", n)
	}
	if strings.Contains(table, "server not ready") || strings.Contains(table, "Cannot allocate memory") {
		t.Fatalf("af_packet at MTU 8192 did not start:\n%s", table)
	}
	var row []string
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| 1 MiB, 2 outstanding |") {
			row = cells(l)
		}
	}
	if len(row) != 2 {
		t.Fatalf("no 1 MiB row with one column in:\n%s", table)
	}
	if m := cellNum.FindStringSubmatch(row[1]); m == nil {
		t.Logf("the run failed after it started (reported as such): %q", row[1])
	} else if v, _ := strconv.ParseFloat(m[1], 64); !(v > 0) {
		t.Errorf("1 MiB at MTU 8192: %q is not a positive figure", row[1])
	}
}
