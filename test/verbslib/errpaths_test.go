package verbslib_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// buildC compiles libverbs/ctest/name.c against <infiniband/verbs.h> and
// the built library and returns the binary's path.
func buildC(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cc := exec.Command("gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", bin,
		"../../libverbs/ctest/"+name+".c", "-L"+dir, "-l:libibverbs.so.1")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s.c: %v\n%s", name, err, out)
	}
	return bin
}

// TestErrorPaths runs ctest/errpaths.c once per case: a requester and a
// responder process (forked before either opens its device, both on
// 127.0.0.1, told apart by their UDP ports), each case bounded in time.
// A case passes when the program's own checks all pass (at least min of
// them) and it printed what it saw: the lines in want, as regexps. Every
// case runs over both transports (transport/case).
func TestErrorPaths(t *testing.T) {
	dir := libDir(t)
	bin := buildC(t, dir, "errpaths")
	summary := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`)
	cases := []struct {
		name string
		min  int
		want []string
	}{
		{"rkey", 7, []string{`write status remote access error`, `read status remote access error`, `target memory unchanged`}},
		{"oob", 7, []string{`write status remote access error`, `read status remote access error`, `target memory unchanged`}},
		{"len", 5, []string{`responder status local length error`, `requester status remote invalid request error`}},
		// rnr_retry 0: the first RNR NAK fails the SEND (errpaths.c bounds
		// the time); 7: it waits for the receive posted 300 ms later.
		{"rnr0", 5, []string{`status RNR retry counter exceeded after \d+ ms`}},
		{"rnr7", 6, []string{`status success after \d+ ms`}},
		// The QP's own budget, timeout 12 x (retry_cnt 3 + 1) = 67.1 ms,
		// plus errpaths.c's stated slack: both bounds are its checks.
		{"kill", 6, []string{`status transport retry counter exceeded after (\d+)\.\d ms \(QP budget .* = 67\.1 ms, slack \d+ ms\)`}},
		// The peer exits before its RTR: the posted WRITE fails after the
		// connect budget, IBV_WC_RETRY_EXC_ERR on either side (metaroce:
		// the accepting side's wait, or the dialing side's CONNECT
		// retries; rocev2: the QP's own timeout x (retry_cnt + 1), as an
		// HCA's, whose QP needs no connection).
		{"early", 2, []string{`status transport retry counter exceeded after (\d+) ms`}},
		{"destroy", 10, []string{`the other QP completed 2/2`, `surviving QP received: success`}},
		{"dereg", 6, []string{`(\d+) WRITEs succeeded before the dereg, (\d+) failed REM_ACCESS_ERR after`,
			`canary after the dereg: intact`}},
	}
	for _, tr := range transports {
		for _, c := range cases {
			t.Run(tr+"/"+c.name, func(t *testing.T) { errpathCase(t, dir, bin, tr, c.name, c.min, c.want, summary) })
		}
	}
}

// errpathCase runs one case of errpaths.c over transport tr: the program's
// summary counts at least min checks, all passed, and it printed the
// lines of want (regexps).
func errpathCase(t *testing.T, dir, bin, tr, name string, min int, want []string, summary *regexp.Regexp) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, name)
	cmd.Env = withLib(dir, "METAROCE_VERBS_IP=127.0.0.1", "METAROCE_TRANSPORT="+tr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("errpaths %s: %v\n%s%s", name, err, out, stderr.String())
	}
	m := summary.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no clean summary:\n%s%s", out, stderr.String())
	}
	if n, _ := strconv.Atoi(string(m[1])); n < min {
		t.Fatalf("%d checks ran, want at least %d:\n%s", n, min, out)
	}
	for _, w := range want {
		re := regexp.MustCompile(`(?m)^case ` + name + `: (?:.*?\b)?` + w) // lazy, on a word boundary: "2880 WRITEs" is 2880, not 0
		s := re.FindSubmatch(out)
		if s == nil {
			t.Fatalf("no line matching %q:\n%s%s", w, out, stderr.String())
		}
		// The figures a case prints must be positive counts.
		for _, f := range s[1:] {
			if n, _ := strconv.Atoi(string(f)); n <= 0 {
				t.Fatalf("%q: count %s:\n%s", w, f, out)
			}
		}
	}
	t.Logf("%s", out)
}

// TestRefusals: what the library does not offer (rdma_cm, UD, atomics,
// SRQ) ends each unmodified program, server and client, with a message
// and a non-zero exit, not a hang: both sides are bounded by 20 s, and
// every side that got as far as the refused call names it.
func TestRefusals(t *testing.T) {
	dir := libDir(t)
	const srq = `metaroce verbs: a shared receive queue \(SRQ\) is not supported`
	const ud = `metaroce verbs: a UD QP \(RC only\) is not supported`
	const atomic = `metaroce verbs: an atomic work request .* is not supported`
	cases := []struct {
		prog           string
		args           []string
		server, client []string // regexps each side's output must match
	}{
		{"ib_write_bw", []string{"-R"}, []string{`rdma_create_event_channel failed`}, []string{`rdma_create_event_channel failed`}},
		{"ib_send_bw", []string{"-c", "UD"}, []string{ud}, []string{ud, `Unable to create QP`}},
		{"ib_atomic_bw", nil, []string{`Failed to exchange data`}, []string{atomic, `Couldn't post send`}},
		{"ibv_srq_pingpong", []string{"-g", "0"}, []string{srq, `Couldn't create SRQ`}, []string{srq, `Couldn't create SRQ`}},
	}
	for _, c := range cases {
		t.Run(c.prog+strings.Join(c.args, ""), func(t *testing.T) {
			path := testenv.Tool(t, c.prog, "Debian packages ibverbs-utils and perftest; run scripts/install-deps.sh")
			port := freeTCPPort(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, path, append(append([]string{}, c.args...), "-p", port)...)
			srv.Env = withLib(dir, "METAROCE_VERBS_IP=127.0.0.1")
			var sout strings.Builder
			srv.Stdout, srv.Stderr = &sout, &sout
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			cli := exec.CommandContext(ctx, path, append(append([]string{}, c.args...), "-p", port, "127.0.0.1")...)
			cli.Env = withLib(dir, "METAROCE_VERBS_IP=127.0.0.1")
			cout, cerr := cli.CombinedOutput()
			serr := srv.Wait()
			if ctx.Err() != nil {
				t.Fatalf("hung (killed after 20 s)\nclient:\n%s\nserver:\n%s", cout, sout.String())
			}
			for side, r := range map[string]struct {
				err  error
				out  string
				want []string
			}{"server": {serr, sout.String(), c.server}, "client": {cerr, string(cout), c.client}} {
				if r.err == nil {
					t.Errorf("%s exited 0:\n%s", side, r.out)
				}
				for _, w := range r.want {
					if !regexp.MustCompile(w).MatchString(r.out) {
						t.Errorf("%s printed no %q:\n%s", side, w, r.out)
					}
				}
			}
		})
	}
}
