package verbslib_test

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runCase runs one case of a two-process C program of ours (bin CASE,
// both processes on 127.0.0.1), bounded in time, and fails t unless the
// program's own checks all pass (at least min of them) and it printed a
// "case NAME: ..." line matching each regexp of want. It returns the
// program's output.
func runCase(t *testing.T, dir, bin, name string, min int, want []string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, name)
	cmd.Env = withLib(dir, append([]string{"METAROCE_VERBS_IP=127.0.0.1"}, env...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", bin, name, err, out, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no clean summary:\n%s%s", out, stderr.String())
	}
	if n, _ := strconv.Atoi(string(m[1])); n < min {
		t.Fatalf("%d checks ran, want at least %d:\n%s", n, min, out)
	}
	for _, w := range want {
		if !regexp.MustCompile(`(?m)^case ` + name + `: ` + w).Match(out) {
			t.Fatalf("no line matching %q:\n%s%s", w, out, stderr.String())
		}
	}
	return string(out)
}

// TestAsyncEvents runs ctest/async.c: no event at open and none from
// normal traffic (a non-blocking async_fd answers EAGAIN); COMM_EST for a
// QP in RTR that receives; QP_FATAL for the QP that the killed peer's
// session failure put in error, none for the QP whose own WRITE reported
// IBV_WC_RETRY_EXC_ERR; ibv_destroy_qp waits for the acknowledgement, and
// drops an event not yet taken. quiet and commest run over rocev2 too;
// fatal and gone need a session that fails with its peer, which rocev2's
// QPs do not have: as on an HCA, a QP with nothing outstanding does not
// learn that its peer died.
func TestAsyncEvents(t *testing.T) {
	dir := libDir(t)
	bin := buildC(t, dir, "async")
	cases := []struct {
		name   string
		min    int
		want   []string
		rocev2 bool // the case runs over rocev2 too
	}{
		{"quiet", 13, []string{`requester: no event at open`, `responder: no event at open`}, true},
		{"commest", 13, []string{`responder \(RTR\): communication established for QP 0`, `requester \(RTS\): no event`}, true},
		{"fatal", 14, []string{`QP 0 WRITE transport retry counter exceeded`,
			`local work queue catastrophic error for QP 1 after \d+ ms`, `QP 1 receive Work Request Flushed Error`,
			`ibv_destroy_qp returned \d+ ms after the call, after the acknowledgement`}, false},
		{"gone", 11, []string{`an event is queued`, `ibv_destroy_qp took \d+ ms; then ibv_get_async_event: Resource temporarily unavailable`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("%s", runCase(t, dir, bin, c.name, c.min, c.want))
		})
		if c.rocev2 {
			t.Run("rocev2/"+c.name, func(t *testing.T) {
				t.Logf("%s", runCase(t, dir, bin, c.name, c.min, c.want, "METAROCE_TRANSPORT=rocev2"))
			})
		}
	}
}
