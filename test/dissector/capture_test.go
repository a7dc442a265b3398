package dissector

import (
	"bufio"
	"os"
	"path/filepath"
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
