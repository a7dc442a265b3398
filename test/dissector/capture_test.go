package dissector

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/engine/pcap"
)

// newCapture starts a pcap file name in t's temporary directory for the
// packets a test builds; closeCapture writes it out and returns its path.
func newCapture(t *testing.T, name string) (w *pcap.Writer, closeCapture func() string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(file)
	if w, err = pcap.NewWriter(bw); err != nil {
		t.Fatal(err)
	}
	return w, func() string {
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

// tsharkFields reads capFile with tshark (the binary at path tshark)
// through the project's dissector and returns, for each packet, the
// values of fields in order (tshark leaves an absent field empty; a row
// it cut short is padded with empty values), and tshark's whole output
// for the test's log.
func tsharkFields(t *testing.T, tshark, capFile string, fields ...string) (rows [][]string, out string) {
	t.Helper()
	lua := filepath.Join(repoRoot(t), "tools", "wireshark", "metaroce.lua")
	args := []string{"-X", "lua_script:" + lua, "-r", capFile, "-T", "fields", "-E", "separator=|"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	out = string(b)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "|")
		for len(f) < len(fields) {
			f = append(f, "")
		}
		rows = append(rows, f)
	}
	return rows, out
}

// tsharkTrue reports whether a boolean field's value, as tshark prints
// it, is set.
func tsharkTrue(s string) bool { return s == "True" || s == "1" }
