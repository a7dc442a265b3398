package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestBenchWithInjectedLoss runs `metaroce bench` on the embedded profile
// over loopback with 0% and 1% injected loss, short points, and checks the
// side-by-side table and the PNG.
func TestBenchWithInjectedLoss(t *testing.T) {
	bin := binary.Build(t)
	dir := t.TempDir()
	plot := filepath.Join(dir, "bench.png")
	s, c := binary.LoopbackPair()
	cmd := exec.Command(bin, "bench", "--set", "bench.duration=400ms", "--set", "bench.sweep.loss=0,0.01",
		"--set", "bench.plot="+plot, "--set", "udp.server_ip="+s, "--set", "udp.client_ip="+c,
		"--set", "udp.port=0", "--set", "udp.rocev2_port=0", "--progress", "always")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	lines := strings.Split(out, "\n")
	var head []string
	rows := map[string][]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "loss" {
			head = f
		}
		if len(f) == 9 && (f[0] == "0%" || f[0] == "1%") {
			rows[f[0]] = f
		}
	}
	wantHead := []string{"loss", "size[B]", "paths", "qps", "metaroce", "Gb/s", "metaroce", "resent", "rocev2", "Gb/s", "rocev2", "resent", "metaroce/rocev2"}
	if strings.Join(head, " ") != strings.Join(wantHead, " ") {
		t.Fatalf("header %q\n%s", head, out)
	}
	if len(rows) != 2 {
		t.Fatalf("want rows for 0%% and 1%%:\n%s", out)
	}
	for loss, f := range rows {
		if f[4] == "failed" || num(t, strings.TrimSuffix(f[4], "*")) <= 0 {
			t.Errorf("%s: metaroce goodput %q", loss, f[4])
		}
	}
	// With 1% loss injected on both receive paths, metaroce must have
	// resent something. (At 0% it may too: a full socket buffer drops on
	// loopback as a switch queue does, and the machine is shared.)
	if num(t, rows["1%"][5]) == 0 {
		t.Errorf("1%% loss: metaroce resent nothing:\n%s", out)
	}
	if !strings.Contains(out, "plot: "+plot) {
		t.Fatalf("no plot line:\n%s", out)
	}
	png, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG (%d bytes)", plot, len(png))
	}
	if !strings.Contains(stderr.String(), "[2/2] rocev2") {
		t.Errorf("no progress on stderr:\n%s", stderr.String())
	}
}
