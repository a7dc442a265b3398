package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// TestConfigErrors: a bad key or value in a profile, the environment or a
// flag is one line on stderr naming the key and the file, and exit 2.
func TestConfigErrors(t *testing.T) {
	bin := binary.Build(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "backend: udp\nudp:\n  loss: 0.01\n  lsos: 0.02\n")
	badValue := write("bad.yaml", "udp:\n  loss: lots\n")
	outOfRange := write("range.yaml", "metaroce:\n  paths: 300\n")
	dpdk := write("dpdk.yaml", "backend: dpdk\n")
	dpdkIP := write("dpdkip.yaml", "backend: dpdk\ndpdk:\n  ports:\n    - {name: net_memif0, ip: 10.0.0}\n")
	dpdkItem := write("dpdkitem.yaml", "backend: dpdk\ndpdk:\n  ports:\n    - {nmae: net_memif0, ip: 10.0.0.1}\n")
	dpdkOld := write("dpdkold.yaml", "backend: dpdk\ndpdk:\n  eal_args: [-l, '1']\n")
	dpdkLoss := write("dpdkloss.yaml", "backend: dpdk\ndpdk:\n  ports: [{name: net_memif0, ip: 10.0.0.1}]\n  impair: {loss: 1.5}\n")
	notYAML := write("broken.yaml", "udp: [\n")
	coreKey := write("corekey.yaml", "metaroce:\n  path_windwo: 8\n")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string // substrings of the one line
	}{
		{"unknown key", []string{"bench", unknown}, nil, []string{unknown, "unknown key udp.lsos"}},
		{"bad value", []string{"perf", "write_bw", "--profile", badValue}, nil, []string{badValue, "udp.loss", `"lots" is not a number`}},
		{"out of range", []string{"bench", "--profile", outOfRange}, nil, []string{outOfRange, "metaroce.paths", "300"}},
		{"env", []string{"bench"}, []string{"METAROCE_UDP_LOSS=abc"}, []string{"METAROCE_UDP_LOSS", "udp.loss", "loopback-udp.yaml"}},
		{"flag", []string{"bench", "--loss", "2"}, nil, []string{"udp.loss", "out of range", "loopback-udp.yaml"}},
		{"set", []string{"bench", "--set", "bench.sweep.qps=0"}, nil, []string{"bench.sweep.qps", "loopback-udp.yaml"}},
		{"unknown set", []string{"bench", "--set", "udp.nope=1"}, nil, []string{"unknown key udp.nope"}},
		{"misspelled core key", []string{"bench", coreKey}, nil, []string{coreKey, "unknown key metaroce.path_windwo"}},
		{"bad transport", []string{"perf", "send_bw", "--transport", "iwarp"}, nil, []string{"transport", `"iwarp"`}},
		{"not yaml", []string{"bench", notYAML}, nil, []string{notYAML, "not a YAML profile"}},
		{"missing file", []string{"bench", filepath.Join(dir, "nope.yaml")}, nil, []string{"nope.yaml"}},
		{"dpdk no ports", []string{"bench", dpdk}, nil, withDPDK(dpdk, "key dpdk.ports", "at least one port")},
		{"dpdk bad ip", []string{"perf", "write_bw", "--profile", dpdkIP}, nil, withDPDK(dpdkIP, "key dpdk.ports[0].ip", `"10.0.0" is not an IPv4 address`)},
		{"dpdk unknown item key", []string{"bench", dpdkItem}, nil, []string{dpdkItem, "key dpdk.ports", "unknown key nmae"}},
		{"dpdk old key", []string{"bench", dpdkOld}, nil, []string{dpdkOld, "unknown key dpdk.eal_args"}},
		{"dpdk loss", []string{"perf", "send_lat", "--profile", dpdkLoss}, nil, withDPDK(dpdkLoss, "key dpdk.impair.loss")},
		{"eal args without dpdk", []string{"perf", "write_bw", "--", "--no-huge"}, nil, []string{"EAL arguments", "backend dpdk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") {
				t.Fatalf("want one line on stderr, got %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not contain %q", msg, w)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
		})
	}
}

// TestFlagOverridesEnvOverridesFile: precedence, seen through a run that
// fails validation on purpose only when the wrong layer wins.
func TestFlagOverridesEnvOverridesFile(t *testing.T) {
	bin := binary.Build(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(p, []byte("udp:\n  loss: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file's 5 is out of range; the environment's 0.5 fixes it, and
	// a flag's 7 breaks it again: each error names the layer that won.
	run := func(env []string, args ...string) string {
		cmd := exec.Command(bin, append([]string{"bench", p, "--set", "bench.transports=nosuch"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = cmd.Run()
		return stderr.String()
	}
	if m := run(nil); !strings.Contains(m, "udp.loss") {
		t.Fatalf("file: %q", m)
	}
	if m := run([]string{"METAROCE_UDP_LOSS=0.5"}); !strings.Contains(m, "bench.transports") {
		t.Fatalf("env should fix udp.loss: %q", m)
	}
	if m := run([]string{"METAROCE_UDP_LOSS=0.5"}, "--loss", "7"); !strings.Contains(m, "udp.loss") {
		t.Fatalf("flag should win over env: %q", m)
	}
}

// withDPDK is what a profile with backend dpdk and a bad dpdk section is
// told: the engine's complaint (want) with the dpdk tag, else that the
// binary has no DPDK (the section is not looked at then).
func withDPDK(file string, want ...string) []string {
	if binary.DPDK {
		return append([]string{file}, want...)
	}
	return []string{file, "key backend: dpdk: built without DPDK: rebuild with -tags dpdk"}
}
