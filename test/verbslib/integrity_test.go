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
)

// TestIntegrityUnderLoss runs ctest/integrity.c (WRITE, WRITE_WITH_IMM,
// READ, SEND, SEND_WITH_IMM, 1 B to 4 MiB, every byte and every
// completion checked, in order per QP) at 0%, 1% and 5% injected loss
// (udp.loss, on each process's receive path), and requires that the loss
// was really injected: no drops at 0, some at 1% and 5%. rocev2 runs at 0%
// and 1%: at 5% its go-back-N resends whole windows of the 4 MiB
// messages (about 6.6 s here, against 0.6 s for metaroce), too long for
// make test.
func TestIntegrityUnderLoss(t *testing.T) {
	dir := libDir(t)
	bin := buildC(t, dir, "integrity")
	summary := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`)
	rounds := regexp.MustCompile(`(?m)^round \S+ \d+ x\d+ ok$`)
	drops := regexp.MustCompile(`(?m)^injected drops: requester (\d+), responder (\d+)$`)
	const nRounds = 5 * 8 // ops x sizes
	for _, run := range []struct{ tr, loss string }{{"metaroce", "0"}, {"metaroce", "0.01"}, {"metaroce", "0.05"},
		{"rocev2", "0"}, {"rocev2", "0.01"}} {
		loss := run.loss
		t.Run(run.tr+"/loss"+loss, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = withLib(dir, "METAROCE_VERBS_IP=127.0.0.1", "METAROCE_UDP_LOSS="+loss, "METAROCE_TRANSPORT="+run.tr,
				"METAROCE_VERBS_GOLIB="+filepath.Join(dir, "libmetaroce-verbs.so"))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("integrity: %v\n%s%s", err, out, stderr.String())
			}
			m := summary.FindSubmatch(out)
			if m == nil {
				t.Fatalf("no clean summary:\n%s%s", out, stderr.String())
			}
			if n, _ := strconv.Atoi(string(m[1])); n < 2*nRounds*2 {
				t.Fatalf("%d checks, want at least %d:\n%s", n, 2*nRounds*2, out)
			}
			if n := len(rounds.FindAll(out, -1)); n != nRounds {
				t.Fatalf("%d rounds ok, want %d:\n%s", n, nRounds, out)
			}
			d := drops.FindSubmatch(out)
			if d == nil {
				t.Fatalf("no drop counts:\n%s", out)
			}
			req, _ := strconv.Atoi(string(d[1]))
			resp, _ := strconv.Atoi(string(d[2]))
			if (loss == "0") != (req+resp == 0) {
				t.Fatalf("loss %s but %d + %d arrivals dropped:\n%s", loss, req, resp, out)
			}
			t.Logf("loss %s: %d + %d arrivals dropped", loss, req, resp)
		})
	}
}

// TestRCPingpongLoss: ibv_rc_pingpong -c (it checks every buffer) at 1%
// injected loss, unmodified, two processes.
func TestRCPingpongLoss(t *testing.T) {
	iters := regexp.MustCompile(`(?m)^200 iters in [0-9.]+ seconds`)
	s, c := pairEnv(t, []string{"METAROCE_UDP_LOSS=0.01"}, "ibv_rc_pingpong", "127.0.0.1", "127.0.0.2",
		"-g", "0", "-n", "200", "-c")
	for side, out := range map[string]string{"server": s, "client": c} {
		if !iters.MatchString(out) {
			t.Errorf("%s reports no 200 iterations:\n%s", side, out)
		}
	}
}
