//go:build dpdk

package dpdkengine

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

const signalChildEnv = "MR_DPDKENGINE_SIGNAL_CHILD"

// TestShutdownOnSIGTERM runs an engine with a shard in a child process
// (this test binary again: it needs an EAL of its own), sends it SIGTERM
// and checks that it shut down cleanly: exit 0, its report, and no EAL
// runtime directory left behind.
func TestShutdownOnSIGTERM(t *testing.T) {
	if os.Getenv(signalChildEnv) != "" {
		signalChild(t)
		return
	}
	self, err := os.Executable()
	require.NoError(t, err)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(self, "-test.run", "^TestShutdownOnSIGTERM$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), signalChildEnv+"=1")
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = cmd.Stdout
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		var lines []string
		runDir := ""
		ready := false
		for sc.Scan() {
			l := sc.Text()
			lines = append(lines, l)
			if d, ok := strings.CutPrefix(strings.TrimSpace(l), "ready "); ok {
				runDir, ready = d, true
				require.DirExists(t, runDir)
				require.NoError(t, cmd.Process.Signal(sig))
			}
		}
		err = cmd.Wait()
		all := strings.Join(lines, "\n")
		require.True(t, ready, "child never got ready:\n%s", all)
		require.NoError(t, err, "child:\n%s", all)
		require.Contains(t, all, "shutdown after "+sig.String())
		require.NoDirExists(t, runDir, "EAL runtime directory left behind")
	}
}

func signalChild(t *testing.T) {
	e, err := Start(Config{Ports: []PortConfig{{Name: "net_memif0", IP: "10.0.0.1"}}, PoolSize: 1023}, nil)
	require.NoError(t, err)
	ep, err := metaroce.NewEndpoint(metaroce.Config{Node: 1, Incarnation: 1, MTU: 1024})
	require.NoError(t, err)
	sh, err := e.Run(ep)
	require.NoError(t, err)
	// Work in flight: a connection attempt to a peer that is not there.
	require.NoError(t, sh.Do(func(now verbs.Time) { _, err = ep.Connect(now, 5) }))
	require.NoError(t, err)
	runDir := filepath.Dir(dpdk.TelemetrySocket())
	wait := e.OnSignal()
	os.Stdout.WriteString("ready " + runDir + "\n") // the parent signals now
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sig, err := wait(ctx)
	require.NoError(t, err)
	require.NotNil(t, sig, "no signal within 20s")
	select {
	case <-sh.Done():
	default:
		t.Fatal("shard still running after shutdown")
	}
	require.False(t, dpdk.Initialized())
	os.Stdout.WriteString("shutdown after " + sig.String() + "\n")
}
