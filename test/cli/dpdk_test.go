//go:build dpdk

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
)

// The DPDK backend through the built binary: a real EAL in each process
// (--no-huge, a file prefix unique to the test), memif vdevs whose socket
// lives in the test's temporary directory, so tests running at once (and
// other packages' EALs) never share anything.

var dpdkSeq atomic.Int64

// dpdkPrefix is an EAL --file-prefix no other process uses. The EAL's
// runtime directory of that prefix is removed when the test ends: a
// process that exits normally removes it itself, one killed on a failure
// does not.
func dpdkPrefix(t *testing.T, role string) string {
	p := fmt.Sprintf("mrcli%d-%d-%s", os.Getpid(), dpdkSeq.Add(1), role)
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", p)) })
	return p
}

// memifProfile writes a perf profile for one end of a memif pair: its
// port's address; the EAL arguments come on the command line after "--".
func memifProfile(t *testing.T, dir, role, ip string) string {
	t.Helper()
	p := filepath.Join(dir, role+".yaml")
	body := fmt.Sprintf(`name: memif-%s
backend: dpdk
dpdk:
  ports:
    - name: net_memif0
      ip: %s/24
  pool_size: 4095
metaroce:
  mtu: 1024
rocev2:
  mtu: 1024
  ack_timeout_code: 14 # perftest's 67 ms: a shared 2-core machine may stall a process for milliseconds
`, role, ip)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// memifEAL is the EAL command line of one end of the memif pair on sock.
func memifEAL(t *testing.T, role, sock string) []string {
	return []string{"--", "--lcores", "0@(0-1)", "--no-huge", "-m", "256", "--no-pci", "--file-prefix", dpdkPrefix(t, role),
		"--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error",
		"--vdev", "net_memif0,role=" + role + ",id=0,socket=" + sock}
}

// TestDPDKPerfMemif runs every perf test as two processes, server and
// client, over a memif pair (the TCP setup exchange over loopback), and
// reads the perftest tables both print; write_bw for both transports.
func TestDPDKPerfMemif(t *testing.T) {
	bin := binary.Build(t)
	for _, tc := range []struct {
		test, transport string
		args            []string
	}{
		{"write_bw", "metaroce", []string{"-s", "65536", "-n", "300", "--report_gbits"}},
		{"write_bw", "rocev2", []string{"-s", "65536", "-n", "300", "--report_gbits"}},
		{"send_bw", "metaroce", []string{"-s", "16384", "-n", "200", "--report_gbits"}},
		{"read_bw", "rocev2", []string{"-s", "65536", "-n", "100", "--report_gbits"}},
		{"write_lat", "metaroce", []string{"-n", "200"}},
		{"send_lat", "rocev2", []string{"-n", "200"}},
		{"read_lat", "metaroce", []string{"-n", "200"}},
	} {
		t.Run(tc.test+"/"+tc.transport, func(t *testing.T) {
			dir := t.TempDir()
			sock := filepath.Join(dir, "memif.sock")
			srvProf := memifProfile(t, dir, "server", "10.98.0.1")
			cliProf := memifProfile(t, dir, "client", "10.98.0.2")
			port := binary.FreePort(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := exec.CommandContext(ctx, bin, append([]string{"perf", tc.test, "--profile", srvProf, "--transport", tc.transport,
				"-p", strconv.Itoa(port), "--wait", "20s"}, memifEAL(t, "server", sock)...)...)
			var srvOut, srvErr lockedBuffer
			srv.Stdout, srv.Stderr = &srvOut, &srvErr
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			// srvDone is closed when the server has exited, srvErr set.
			srvDone := make(chan struct{})
			var srvErr2 error
			go func() { srvErr2 = srv.Wait(); close(srvDone) }()
			defer func() {
				cancel()
				<-srvDone
			}()
			// The server prints its banner once its engine runs: its memif
			// socket listens and its port is started. A memif client that
			// comes earlier fails to start (or is never answered).
			for !strings.Contains(srvOut.String(), "Waiting for client") {
				select {
				case <-srvDone:
					t.Fatalf("server ended: %v\n%s\n%s", srvErr2, srvOut.String(), srvErr.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			cli := exec.CommandContext(ctx, bin, append(append([]string{"perf", tc.test, "127.0.0.1", "--profile", cliProf,
				"--transport", tc.transport, "-p", strconv.Itoa(port)}, tc.args...), memifEAL(t, "client", sock)...)...)
			var cliOut, cliErr bytes.Buffer
			cli.Stdout, cli.Stderr = &cliOut, &cliErr
			if err := cli.Run(); err != nil {
				t.Fatalf("client: %v\n%s\n%s\nserver:\n%s\n%s", err, cliOut.String(), cliErr.String(), srvOut.String(), srvErr.String())
			}
			select {
			case <-srvDone:
			case <-time.After(20 * time.Second):
				t.Fatalf("server did not end\n%s", srvOut.String())
			}
			if srvErr2 != nil {
				t.Fatalf("server: %v\n%s\n%s", srvErr2, srvOut.String(), srvErr.String())
			}
			out := cliOut.String()
			for _, want := range []string{"Backend        : dpdk", "Transport       : " + tc.transport,
				"local address: 10.98.0.2:", "remote address: 10.98.0.1:"} {
				if !strings.Contains(out, want) {
					t.Errorf("client output lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(cliErr.String(), "--no-huge") {
				t.Errorf("no --no-huge warning on stderr:\n%s", cliErr.String())
			}
			if strings.HasSuffix(tc.test, "_lat") {
				f := row(t, out, latHeader)
				if len(f) != 9 || f[1] != "200" {
					t.Fatalf("latency row %q\n%s", f, out)
				}
				tmin, tavg, tmax := num(t, f[2]), num(t, f[5]), num(t, f[3])
				if !(tmin > 0 && tmin <= tavg && tavg <= tmax) {
					t.Fatalf("t_min %v t_avg %v t_max %v", tmin, tavg, tmax)
				}
				t.Logf("%s over %s, dpdk memif: t_typical %s us, t_avg %s us", tc.test, tc.transport, f[4], f[5])
				return
			}
			f := row(t, out, bwHeaderG)
			if len(f) != 5 || f[0] != tc.args[1] || f[1] != tc.args[3] {
				t.Fatalf("row %q\n%s", f, out)
			}
			avg := num(t, f[3])
			if !(avg > 0 && num(t, f[2]) >= avg) {
				t.Fatalf("row %q", f)
			}
			// The server prints the same measurement (MB/sec).
			sf := row(t, srvOut.String(), bwHeader)
			if sf[0] != f[0] || sf[1] != f[1] {
				t.Fatalf("server row %q, client %q", sf, f)
			}
			t.Logf("%s over %s, dpdk memif: %s Gb/s average", tc.test, tc.transport, f[3])
		})
	}
}

// TestDPDKBenchMemifLoss runs `metaroce bench` over DPDK in one process:
// two memif ports of one EAL, the server node on one, the client on the
// other, 0% and 2% loss injected by the engine's impairment stage; both
// transports, the table and the PNG.
func TestDPDKBenchMemifLoss(t *testing.T) {
	bin := binary.Build(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "memif.sock")
	plot := filepath.Join(dir, "bench.png")
	prof := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(prof, []byte(`name: bench-memif
backend: dpdk
dpdk:
  ports:
    - {name: net_memif0, ip: 10.97.0.1/24}
    - {name: net_memif1, ip: 10.97.0.2/24}
  impair: {seed: 7}
metaroce: {mtu: 1024}
rocev2: {mtu: 1024, ack_timeout_code: 12} # 16 ms: a loaded 2-core machine stalls a node for milliseconds
bench:
  duration: 400ms
  sweep: {loss: [0, 0.02]}
  plot: `+plot+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", prof, "--", "--lcores", "0@(0-1)", "--no-huge", "-m", "512", "--no-pci",
		"--file-prefix", dpdkPrefix(t, "bench"), "--log-level", "lib.eal:error", "--log-level", "pmd.net.memif:error",
		"--vdev", "net_memif0,role=server,id=0,socket="+sock, "--vdev", "net_memif1,role=client,id=0,socket="+sock)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 9 && (f[0] == "0%" || f[0] == "2%") {
			rows[f[0]] = f
		}
	}
	if len(rows) != 2 || !strings.Contains(out, "backend dpdk") {
		t.Fatalf("want rows for 0%% and 2%% over dpdk:\n%s", out)
	}
	for loss, f := range rows {
		for _, col := range []int{4, 6} { // metaroce and rocev2 goodput
			if f[col] == "failed" || num(t, strings.TrimSuffix(f[col], "*")) <= 0 {
				t.Errorf("%s: goodput column %d is %q\n%s", loss, col, f[col], out)
			}
		}
	}
	// The impairment stage dropped packets on both nodes: both transports
	// had to resend.
	if num(t, rows["2%"][5]) == 0 || num(t, rows["2%"][7]) == 0 {
		t.Errorf("2%% loss: a transport resent nothing:\n%s", out)
	}
	png, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG (%d bytes)", plot, len(png))
	}
	t.Logf("\n%s", out)
}
