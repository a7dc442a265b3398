package verbslib_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/testenv"
)

// freeTCPPort returns a TCP port on loopback nobody listens on now (the
// programs' own out-of-band exchange).
func freeTCPPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// pairEnv runs an unmodified program as server (device on serverIP) and
// client (device on clientIP), two processes over loopback, each bounded
// in time, with env added to both processes' environments; it returns
// both outputs, failing t unless both exit 0.
func pairEnv(t *testing.T, env []string, prog, serverIP, clientIP string, args ...string) (server, client string) {
	t.Helper()
	return pairRun(t, prog, serverIP, append([]string{"METAROCE_VERBS_IP=" + serverIP}, env...),
		append([]string{"METAROCE_VERBS_IP=" + clientIP}, env...), args...)
}

// pairRun runs prog's server with environment senv and its client with
// cenv, the client told the server's TCP address host.
func pairRun(t *testing.T, prog, host string, senv, cenv []string, args ...string) (server, client string) {
	t.Helper()
	dir := libDir(t)
	path := testenv.Tool(t, prog, "Debian packages ibverbs-utils and perftest; run scripts/install-deps.sh")
	port := freeTCPPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, path, append(append([]string{}, args...), "-p", port)...)
	srv.Env = withLib(dir, senv...)
	var sout strings.Builder
	srv.Stdout, srv.Stderr = &sout, &sout
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The client retries its TCP connect only briefly: start it once
	// the server listens (or after 2 s, and let it fail then).
	waitListen(port, 2*time.Second)
	cli := exec.CommandContext(ctx, path, append(append([]string{}, args...), "-p", port, host)...)
	cli.Env = withLib(dir, cenv...)
	cout, cerr := cli.CombinedOutput()
	serr := srv.Wait()
	if cerr != nil || serr != nil {
		t.Fatalf("%s %v: client %v, server %v\nclient env %v:\n%s\nserver env %v:\n%s", prog, args, cerr, serr, cenv, cout, senv, sout.String())
	}
	return sout.String(), string(cout)
}

// waitListen waits until some socket listens on TCP port (in the
// kernel's tables, without connecting to it: the programs' servers
// accept exactly one connection), at most d.
func waitListen(port string, d time.Duration) {
	n, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X ", n)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				// sl local_address rem_address st: st 0A is LISTEN.
				if fs := strings.Fields(l); len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
					return
				}
			}
		}
	}
}

// The two address layouts: two loopback addresses, and one address with
// two processes told apart by their UDP ports (carried in the QPNs).
var layouts = []struct{ name, server, client string }{
	{"two-ips", "127.0.0.1", "127.0.0.2"},
	{"one-ip", "127.0.0.1", "127.0.0.1"},
}

// transports are the profile's transports the same unmodified binaries
// run over (METAROCE_TRANSPORT).
var transports = []string{"metaroce", "rocev2"}

// overAll runs f once per transport and layout, as subtests
// transport/layout: the same programs over both transports, on two IPs
// and on one.
func overAll(t *testing.T, f func(t *testing.T, env []string, server, client string)) {
	for _, tr := range transports {
		for _, l := range layouts {
			t.Run(tr+"/"+l.name, func(t *testing.T) {
				f(t, []string{"METAROCE_TRANSPORT=" + tr}, l.server, l.client)
			})
		}
	}
}

// TestRCPingpong: ibv_rc_pingpong -g 0 between two processes, polled, with
// completion events (-e), checking the data (-c) and inline (-s 64), and
// the same through the ibv_wr_* API (-N: ibv_create_qp_ex, ibv_wr_start,
// ibv_wr_send, ibv_wr_set_sge, ibv_wr_complete); each side reports its
// iterations.
func TestRCPingpong(t *testing.T) {
	iters := regexp.MustCompile(`(?m)^(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter$`)
	addr := regexp.MustCompile(`(?m)^\s+local address:\s+LID 0x0000, QPN 0x([0-9a-f]{6}), PSN 0x[0-9a-f]+, GID ::ffff:(127\.0\.0\.\d)$`)
	overAll(t, func(t *testing.T, env []string, server, client string) {
		for _, extra := range [][]string{nil, {"-e"}, {"-c"}, {"-s", "64"}, {"-N"}, {"-N", "-c"}, {"-N", "-s", "64"}, {"-N", "-e"}} {
			t.Run(strings.Join(append([]string{"plain"}, extra...), ""), func(t *testing.T) {
				args := append([]string{"-g", "0", "-n", "200"}, extra...)
				s, c := pairEnv(t, env, "ibv_rc_pingpong", server, client, args...)
				for side, out := range map[string]string{"server": s, "client": c} {
					m := iters.FindStringSubmatch(out)
					if m == nil || m[1] != "200" {
						t.Errorf("%s reports no 200 iterations:\n%s", side, out)
					}
					a := addr.FindStringSubmatch(out)
					want := map[string]string{"server": server, "client": client}[side]
					if a == nil || a[2] != want {
						t.Errorf("%s: local GID is not ::ffff:%s:\n%s", side, want, out)
					}
				}
			})
		}
	})
}

// TestPerftestBW: ib_write_bw, ib_send_bw and ib_read_bw -n 20 between two
// processes print their result row (65536 bytes, 20 iterations, a
// bandwidth above zero).
func TestPerftestBW(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\s*65536\s+20\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)
	overAll(t, func(t *testing.T, env []string, server, client string) {
		for _, prog := range []string{"ib_write_bw", "ib_send_bw", "ib_read_bw"} {
			t.Run(prog, func(t *testing.T) {
				_, c := pairEnv(t, env, prog, server, client, "-n", "20", "-F")
				m := row.FindStringSubmatch(c)
				if m == nil {
					t.Fatalf("no result row:\n%s", c)
				}
				if bw, _ := strconv.ParseFloat(m[2], 64); !(bw > 0) {
					t.Fatalf("average bandwidth %s MB/s:\n%s", m[2], c)
				}
			})
		}
	})
}

// TestPerftestLat: the three latency tests with -n 20 print their row.
func TestPerftestLat(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\s*2\s+20\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)`)
	overAll(t, func(t *testing.T, env []string, server, client string) {
		for _, prog := range []string{"ib_write_lat", "ib_send_lat", "ib_read_lat"} {
			t.Run(prog, func(t *testing.T) {
				_, c := pairEnv(t, env, prog, server, client, "-n", "20", "-F")
				m := row.FindStringSubmatch(c)
				if m == nil {
					t.Fatalf("no result row:\n%s", c)
				}
				if lat, _ := strconv.ParseFloat(m[3], 64); !(lat > 0) {
					t.Fatalf("typical latency %s usec:\n%s", m[3], c)
				}
			})
		}
	})
}

// TestPerftestFlags: the perftest options issue 14 names, each run as an
// unmodified server/client pair: a duration (-D 2), four QPs (-q 4),
// bidirectional (-b), all sizes (-a, bounded by -n 20), completion events
// (-e, where perftest offers it: not for WRITE, which perftest itself
// refuses), JSON output, and a 1 MiB ib_write_lat, whose client polls the
// last byte of multi-packet WRITEs.
func TestPerftestFlags(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+[0-9.]+\s+([0-9.]+)`)
	cases := []struct {
		prog string
		args []string
		rows int // result rows expected at least
		// long: a case of seconds (a fixed duration, all sizes up to
		// 8 MiB) whose subject is perftest's option, not the addresses:
		// it runs on one layout per transport, the layouts alternating
		// (metaroce on two IPs, rocev2 on one), to bound the test's time.
		long bool
	}{
		{"ib_write_bw", []string{"-D", "2"}, 1, true},
		{"ib_write_bw", []string{"-q", "4", "-n", "20"}, 1, false},
		{"ib_write_bw", []string{"-b", "-n", "20"}, 1, false},
		{"ib_read_bw", []string{"-a", "-n", "20"}, 23, true}, // 2 B .. 8 MiB
		{"ib_send_bw", []string{"-e", "-n", "20"}, 1, false},
		{"ib_read_bw", []string{"-e", "-n", "20"}, 1, false},
		{"ib_send_lat", []string{"-e", "-n", "20"}, 1, false},
		{"ib_read_lat", []string{"-e", "-n", "20"}, 1, false},
		{"ib_write_lat", []string{"-s", "1048576", "-n", "20"}, 1, false},
	}
	runs := 0
	overAll(t, func(t *testing.T, env []string, server, client string) {
		runs++
		for _, c := range cases {
			if c.long && runs%3 != 1 { // runs 1 and 4: metaroce/two-ips, rocev2/one-ip
				continue
			}
			t.Run(c.prog+strings.Join(c.args, ""), func(t *testing.T) {
				_, out := pairEnv(t, env, c.prog, server, client, append([]string{"-F"}, c.args...)...)
				if n := len(row.FindAllString(out, -1)); n < c.rows {
					t.Fatalf("%d result rows, want %d:\n%s", n, c.rows, out)
				}
			})
		}
		t.Run("out_json", func(t *testing.T) {
			file := t.TempDir() + "/out.json"
			_, out := pairEnv(t, env, "ib_write_bw", server, client, "-F", "-n", "20", "--out_json", "--out_json_file="+file)
			b, err := os.ReadFile(file)
			if err != nil || !strings.Contains(string(b), `Device: "metaroce0"`) || !strings.Contains(string(b), "BW_average") {
				t.Fatalf("JSON report %v:\n%s\n%s", err, b, out)
			}
		})
	})
}
