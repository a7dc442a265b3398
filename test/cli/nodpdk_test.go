//go:build !dpdk

package cli

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestNoDPDK: a binary built without -tags dpdk refuses backend dpdk,
// from a profile or a flag, as a configuration error: exit 2, one line
// on stderr naming the profile and the fix, nothing on stdout.
func TestNoDPDK(t *testing.T) {
	bin := binary.Build(t)
	for _, args := range [][]string{
		{"perf", "write_bw", "--profile", "../../configs/memif-pair.yaml"},
		{"bench", "../../configs/two-hosts-dpdk.yaml"},
		{"bench", "--backend", "dpdk"},
	} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want 2\n%s", args, err, stderr.String())
			continue
		}
		msg := stderr.String()
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "metaroce: ") ||
			!strings.HasSuffix(msg, ": key backend: dpdk: built without DPDK: rebuild with -tags dpdk\n") {
			t.Errorf("%v: stderr %q", args, msg)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", args, stdout.String())
		}
	}
}
