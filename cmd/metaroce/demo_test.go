package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/internal/golden"
)

func TestDemoVerifiesEveryScenario(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runDemo(&out, demoOpts{paths: 8, mtu: 4096, sizeMiB: 4, rate: 100, seed: 3}))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	rows := 0
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || f[len(f)-1] != "true" && f[len(f)-1] != "false" {
			continue
		}
		rows++
		require.Equal(t, "true", f[len(f)-1], "bytes not verified: %s", l)
		require.Equal(t, "0", f[len(f)-2], "failed work requests: %s", l)
	}
	require.Equal(t, 7, rows, out.String())
}

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "metaroce dev\n", out.String())
}

// `metaroce demo` with its default flags (what `make demo-mem` runs) is
// deterministic (virtual time, seeded link): its output is the golden
// file the README quotes (go test ./cmd/metaroce -update rewrites both).
func TestDemoGolden(t *testing.T) {
	out, stderr, err := execute(t, "demo")
	require.NoError(t, err, stderr)
	golden.File(t, "testdata/demo-mem.golden", []byte(out))
}
