package cli

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestPerfSetupFailsFast: a client whose connection cannot come up (it
// drops every packet it receives, so no answer to its CONNECTs arrives)
// reports why as soon as its retries are spent (1.43 s with the default
// doubling waits), not after the 15 s setup timeout.
func TestPerfSetupFailsFast(t *testing.T) {
	bin := binary.Build(t)
	env := perfEnv()
	port := binary.FreePort(t)
	_, _ = startServer(t, bin, env, port, "write_bw")
	start := time.Now()
	cmd := exec.Command(bin, "perf", "write_bw", "127.0.0.1", "-p", strconv.Itoa(port), "-n", "10", "--loss", "1")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil {
		t.Fatalf("client succeeded with every packet dropped:\n%s", out)
	}
	if !strings.Contains(string(out), "connection failed: connection request unanswered") {
		t.Fatalf("no failure reason in:\n%s", out)
	}
	// The retries take 1.43 s; 10 s leaves room for a slow machine and is
	// still well short of the setup timeout.
	if took > 10*time.Second {
		t.Fatalf("client took %v to give up", took)
	}
	t.Logf("client gave up after %v", took)
}
