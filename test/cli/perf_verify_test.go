package cli

import (
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// repairRow returns the first number of the client's "Loss repair" row
// name (the client's own column).
func repairRow(t *testing.T, out, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ ` + regexp.QuoteMeta(name) + ` +: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no loss-repair row %q in:\n%s", name, out)
	}
	return num(t, m[1])
}

// TestPerfVerifyPasses: --verify moves patterns through every BW test at
// 1% injected loss at the receiving end, checks every byte, exits 0 at
// both ends, and both print the closing loss-repair summary with the
// peer's column.
func TestPerfVerifyPasses(t *testing.T) {
	bin := binary.Build(t)
	for _, test := range []string{"write_bw", "send_bw", "read_bw"} {
		t.Run(test, func(t *testing.T) {
			env := perfEnv()
			port := binary.FreePort(t)
			// The loss is at the data's receiver: the server for WRITE and
			// SEND, the client for READ responses.
			srvArgs, cliLoss := []string{test, "--loss", "0.01"}, "0"
			if test == "read_bw" {
				srvArgs, cliLoss = []string{test}, "0.01"
			}
			srvOut, wait := startServer(t, bin, env, port, srvArgs...)
			cmd := exec.Command(bin, "perf", test, "127.0.0.1", "-p", strconv.Itoa(port), "-s", "20000", "-n", "400", "-q", "2",
				"--verify", "--loss", cliLoss)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("client: %v\n%s\nserver:\n%s", err, out, srvOut)
			}
			if err := wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srvOut)
			}
			if f := row(t, string(out), bwHeader); f[1] != "800" {
				t.Fatalf("row %q", f)
			}
			for _, o := range []string{string(out), srvOut.String()} {
				if !strings.Contains(o, " Loss repair     : ") || !strings.Contains(o, "(this end)") {
					t.Fatalf("no loss-repair summary:\n%s", o)
				}
			}
			if !strings.Contains(string(out), "client (this end)") || !strings.Contains(srvOut.String(), "server (this end)") {
				t.Fatalf("columns not named:\n%s\n%s", out, srvOut)
			}
			// 800 messages of 5 packets each were sent by the data's
			// sender, at least once; 1% loss made it resend some.
			sent := repairRow(t, string(out), "data sent")
			if test == "read_bw" {
				sent = repairRow(t, srvOut.String(), "data sent")
			}
			if sent < 800*5 {
				t.Fatalf("data sent %v, want >= 4000", sent)
			}
		})
	}
}

// TestPerfVerifyReportsCorruption: a byte that is wrong where the data
// landed (flipped by the test-only MRPERF_TEST_CORRUPT hook just before
// the check, as a forged packet would have left it) is reported with its
// QP, message and offset, and perf exits non-zero.
func TestPerfVerifyReportsCorruption(t *testing.T) {
	bin := binary.Build(t)
	for _, tc := range []struct {
		test       string
		atServer   bool
		qp, msg    int
		offset     int
		clientWins bool
	}{{"write_bw", true, 1, 350, 4321, true}, {"send_bw", true, 0, 17, 0, true}, {"read_bw", false, 1, 250, 19999, true}} {
		t.Run(tc.test, func(t *testing.T) {
			env := perfEnv()
			corrupt := "MRPERF_TEST_CORRUPT=" + strconv.Itoa(tc.qp) + ":" + strconv.Itoa(tc.msg) + ":" + strconv.Itoa(tc.offset)
			srvEnv, cliEnv := env, env
			if tc.atServer {
				srvEnv = append(append([]string(nil), env...), corrupt)
			} else {
				cliEnv = append(append([]string(nil), env...), corrupt)
			}
			port := binary.FreePort(t)
			srvOut, wait := startServer(t, bin, srvEnv, port, tc.test)
			cmd := exec.Command(bin, "perf", tc.test, "127.0.0.1", "-p", strconv.Itoa(port), "-s", "20000", "-n", "400", "-q", "2", "--verify")
			cmd.Env = cliEnv
			out, err := cmd.CombinedOutput()
			want := "verify: QP " + strconv.Itoa(tc.qp) + " message " + strconv.Itoa(tc.msg) + ": first wrong byte at offset " + strconv.Itoa(tc.offset) + ":"
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("client: err %v, want exit 1 with %q:\n%s\nserver:\n%s", err, want, out, srvOut)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("client exit: %v", err)
			}
			serr := wait()
			if tc.atServer && (serr == nil || !strings.Contains(srvOut.String(), want)) {
				t.Fatalf("server (the checking end): err %v, want %q:\n%s", serr, want, srvOut)
			}
		})
	}
}

// TestPerfSaysPeerDead: when the server stops answering mid-run (SIGSTOP,
// a stalled host), the client's error and summary say the peer was found
// dead, after the profile's metaroce.peer_dead_timeout (set here by the
// environment), not just "retry exceeded".
func TestPerfSaysPeerDead(t *testing.T) {
	bin := binary.Build(t)
	env := append(perfEnv(), "METAROCE_METAROCE_PEER_DEAD_TIMEOUT=300ms", "METAROCE_METAROCE_KEEPALIVE_INTERVAL=20ms")
	port := binary.FreePort(t)
	srv := exec.Command(bin, "perf", "write_bw", "-p", strconv.Itoa(port), "--wait", "30s")
	srv.Env = env
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Process.Signal(syscall.SIGCONT)
		_ = srv.Wait()
	})
	cmd := exec.Command(bin, "perf", "write_bw", "127.0.0.1", "-p", strconv.Itoa(port), "-D", "60", "-s", "4096", "--progress", "always")
	cmd.Env = env
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The first progress line (after 2 s) says the run is under way.
	for end := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "messages,"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			_ = cmd.Process.Kill()
			t.Fatalf("no progress:\n%s\nserver:\n%s", out.String(), srvOut.String())
		}
	}
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("client did not fail with its peer stopped:\n%s", out.String())
	}
	if err == nil {
		t.Fatalf("client exited 0 with its peer stopped:\n%s", out.String())
	}
	for _, want := range []string{"metaroce connection failed: peer dead", " failed          : peer dead"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
	}
}
