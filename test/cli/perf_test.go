package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// perftest's headers, verbatim.
const (
	bwHeader  = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	bwHeaderG = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	latHeader = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
)

// perfEnv is the environment of one server/client pair: its own loopback
// addresses and a kernel-chosen UDP port.
func perfEnv() []string {
	s, c := binary.LoopbackPair()
	return append(os.Environ(), "METAROCE_UDP_SERVER_IP="+s, "METAROCE_UDP_CLIENT_IP="+c,
		"METAROCE_UDP_PORT=0", "METAROCE_UDP_ROCEV2_PORT=0")
}

// startServer starts `metaroce perf TEST` (no host) and returns its
// output buffer and a wait function.
func startServer(t *testing.T, bin string, env []string, port int, args ...string) (*bytes.Buffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, bin, append([]string{"perf"}, append(args, "-p", strconv.Itoa(port), "--wait", "30s")...)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &out, func() error {
		<-done
		return werr
	}
}

// row returns the fields of the line after header in out.
func row(t *testing.T, out, header string) []string {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l == header && i+1 < len(lines) {
			return strings.Fields(lines[i+1])
		}
	}
	t.Fatalf("no line %q in:\n%s", header, out)
	return nil
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

func TestPerfWriteBWServerClient(t *testing.T) {
	bin := binary.Build(t)
	env := perfEnv()
	port := binary.FreePort(t)
	srvOut, wait := startServer(t, bin, env, port, "write_bw")
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(bin, "perf", "write_bw", "127.0.0.1", "-p", strconv.Itoa(port), "-s", "65536", "-n", "300",
		"-q", "2", "--report_gbits", "--out_json", "--out_json_file", jsonFile)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s\nserver:\n%s", err, out, srvOut)
	}
	f := row(t, string(out), bwHeaderG)
	if len(f) != 5 || f[0] != "65536" || f[1] != "600" {
		t.Fatalf("row %q", f)
	}
	peak, avg, rate := num(t, f[2]), num(t, f[3]), num(t, f[4])
	if !(avg > 0 && peak >= avg && rate > 0) {
		t.Fatalf("peak %v avg %v rate %v", peak, avg, rate)
	}
	// MsgRate and BW average are two views of one measurement.
	if got := rate * 1e6 * 65536 * 8 / 1e9; got < avg*0.99 || got > avg*1.01 {
		t.Fatalf("MsgRate %v Mpps is %v Gb/s, table says %v", rate, got, avg)
	}
	if err := wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut)
	}
	sf := row(t, srvOut.String(), bwHeader)
	if sf[0] != "65536" || sf[1] != "600" {
		t.Fatalf("server row %q", sf)
	}
	var doc struct {
		TestInfo map[string]any `json:"test_info"`
		Results  struct {
			MsgSize   int     `json:"MsgSize"`
			Iters     int     `json:"n_iterations"`
			BWPeak    float64 `json:"BW_peak"`
			BWAverage float64 `json:"BW_average"`
			MsgRate   float64 `json:"MsgRate"`
		} `json:"results"`
	}
	b, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Results.MsgSize != 65536 || doc.Results.Iters != 600 || doc.Results.BWAverage < avg-0.01 || doc.Results.BWAverage > avg+0.01 ||
		doc.TestInfo["test"] != "RDMA_Write_BW_Test" || doc.TestInfo["Number_of_qps"] != 2.0 {
		t.Fatalf("json %s", b)
	}
}

func TestPerfLatencyBothTransports(t *testing.T) {
	bin := binary.Build(t)
	for _, tc := range []struct{ test, transport string }{{"send_lat", "rocev2"}, {"write_lat", "metaroce"}, {"read_lat", "metaroce"}} {
		t.Run(tc.test+"/"+tc.transport, func(t *testing.T) {
			env := perfEnv()
			port := binary.FreePort(t)
			srvOut, wait := startServer(t, bin, env, port, tc.test, "--transport", tc.transport)
			cmd := exec.Command(bin, "perf", tc.test, "127.0.0.1", "-p", strconv.Itoa(port), "-n", "200", "--transport", tc.transport)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("client: %v\n%s\nserver:\n%s", err, out, srvOut)
			}
			f := row(t, string(out), latHeader)
			if len(f) != 9 || f[0] != "2" || f[1] != "200" {
				t.Fatalf("row %q", f)
			}
			min, max, typ, p99 := num(t, f[2]), num(t, f[3]), num(t, f[4]), num(t, f[7])
			if !(min > 0 && min <= typ && typ <= p99 && p99 <= max) {
				t.Fatalf("latencies out of order: %q", f)
			}
			if !strings.Contains(string(out), "Transport       : "+tc.transport) {
				t.Fatalf("banner does not name %s:\n%s", tc.transport, out)
			}
			if err := wait(); err != nil {
				t.Fatalf("server: %v\n%s", err, srvOut)
			}
		})
	}
}

// TestPerfSIGINTPrintsPartial: SIGINT during a long client run stops it
// cleanly with the partial result.
func TestPerfSIGINTPrintsPartial(t *testing.T) {
	bin := binary.Build(t)
	env := perfEnv()
	port := binary.FreePort(t)
	_, _ = startServer(t, bin, env, port, "send_bw")
	cmd := exec.Command(bin, "perf", "send_bw", "127.0.0.1", "-p", strconv.Itoa(port), "-D", "30", "-s", "4096")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("client did not stop on SIGINT:\n%s", out.String())
	}
	f := row(t, out.String(), bwHeader)
	if f[0] != "4096" || num(t, f[1]) == 0 || num(t, f[3]) == 0 {
		t.Fatalf("partial row %q", f)
	}
	if !strings.Contains(out.String(), "interrupted: partial result") {
		t.Fatalf("no partial mark:\n%s", out.String())
	}
	t.Logf("stopped %v after SIGINT", time.Since(start))
}

// TestPerfBidirectional: -b runs the test in both directions and reports
// the sum, on both ends.
func TestPerfBidirectional(t *testing.T) {
	bin := binary.Build(t)
	env := perfEnv()
	port := binary.FreePort(t)
	srvOut, wait := startServer(t, bin, env, port, "read_bw", "-b")
	cmd := exec.Command(bin, "perf", "read_bw", "127.0.0.1", "-b", "-p", strconv.Itoa(port), "-s", "16384", "-n", "200", "-q", "2")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s\nserver:\n%s", err, out, srvOut)
	}
	if !strings.Contains(string(out), "Bidirectional  : ON") {
		t.Fatalf("banner:\n%s", out)
	}
	f := row(t, string(out), bwHeader)
	if f[0] != "16384" || f[1] != "400" || num(t, f[3]) <= 0 {
		t.Fatalf("row %q", f)
	}
	if err := wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut)
	}
	// Both ends print the same summed figures.
	if sf := row(t, srvOut.String(), bwHeader); sf[3] != f[3] {
		t.Fatalf("server %q, client %q", sf, f)
	}
}
