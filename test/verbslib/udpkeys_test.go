package verbslib_test

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// TestProfileDSCP: the profile's udp.dscp (here METAROCE_UDP_DSCP=46)
// marks every packet the library sends, over both transports, as it does
// for the metaroce command: tshark, capturing on lo, reads the DSCP of the
// client's datagrams during an ibv_rc_pingpong. (The library once built
// its socket without the profile's udp.dscp and udp.burst.) The pair runs
// on 127.0.0.76 and .77, addresses no other test uses, so that the filter
// sees this pair's datagrams alone while other packages' tests run.
func TestProfileDSCP(t *testing.T) {
	testenv.Root(t, "capturing on lo")
	tshark := testenv.Tool(t, "tshark", "Debian package tshark; run scripts/install-deps.sh")
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			const want = 20
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			capture := exec.CommandContext(ctx, tshark, "-i", "lo", "-n", "-l", "-f", "udp and src host 127.0.0.77 and dst host 127.0.0.76",
				"-c", strconv.Itoa(want), "-a", "duration:50", "-T", "fields", "-e", "ip.dsfield.dscp")
			out, err := capture.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			errp, err := capture.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := capture.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = capture.Process.Kill(); _ = capture.Wait() }()
			// tshark says "Capturing on 'Loopback: lo'" once it captures.
			ready := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(errp)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "Capturing on") {
						close(ready)
						break
					}
				}
				for sc.Scan() {
				}
			}()
			select {
			case <-ready:
			case <-time.After(20 * time.Second):
				t.Fatal("tshark did not start capturing within 20 s")
			}
			pairEnv(t, []string{"METAROCE_TRANSPORT=" + tr, "METAROCE_UDP_DSCP=46"}, "ibv_rc_pingpong",
				"127.0.0.76", "127.0.0.77", "-g", "0", "-n", "50")
			var dscps []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				dscps = append(dscps, strings.TrimSpace(sc.Text()))
			}
			if len(dscps) < want {
				t.Fatalf("tshark read %d of the client's datagrams, want %d", len(dscps), want)
			}
			for i, d := range dscps {
				if d != "46" {
					t.Fatalf("datagram %d of %d: DSCP %q, want 46 (all: %v)", i+1, len(dscps), d, dscps)
				}
			}
			t.Logf("%s: %d datagrams from the client, all DSCP 46", tr, len(dscps))
		})
	}
}
