package fabricscript

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/test/internal/binary"
	"github.com/metaroce/metaroce/test/internal/testenv"
	"github.com/stretchr/testify/require"
)

const (
	script  = "../../scripts/netns-fabric.sh"
	profile = "../../configs/netns-fabric.yaml"
	spines  = 4
)

// fab runs the script with this test's namespace prefix ("mrfs<pid>-":
// neither the script's default "mrfab-" nor test/kernelfabric's
// "mrf<pid>", so tests running at once never share a namespace).
type fab struct {
	t      *testing.T
	prefix string
}

func (f fab) script(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "MR_FABRIC_PREFIX="+f.prefix)
	out, err := cmd.CombinedOutput()
	require.NoError(f.t, err, "netns-fabric.sh %v:\n%s", args, out)
	return string(out)
}

func (f fab) ip(args ...string) string {
	f.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(f.t, err, "ip %v:\n%s", args, out)
	return string(out)
}

var devRE = regexp.MustCompile(`dev ([uv])(\d+)`)

// spineOf asks leaf ns which spine a UDP packet from src:sport to
// dst:dport, arriving on iif, is forwarded to.
func (f fab) spineOf(leaf, iif, src, dst string, sport, dport int) int {
	f.t.Helper()
	out := f.ip("-n", f.prefix+leaf, "route", "get", dst, "from", src, "iif", iif, "ipproto", "udp",
		"sport", strconv.Itoa(sport), "dport", strconv.Itoa(dport))
	m := devRE.FindStringSubmatch(out)
	require.NotNil(f.t, m, "no spine interface in %q", out)
	n, _ := strconv.Atoi(m[2])
	return n
}

func (f fab) spineRx() [spines]uint64 {
	f.t.Helper()
	var rx [spines]uint64
	for i := range rx {
		out := f.ip("netns", "exec", fmt.Sprintf("%sr%d", f.prefix, i+1), "cat", "/sys/class/net/ra0/statistics/rx_packets")
		v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		require.NoError(f.t, err)
		rx[i] = v
	}
	return rx
}

func (f fab) namespaces() []string {
	var own []string
	for _, l := range strings.Split(f.ip("netns", "list"), "\n") {
		if n, _, _ := strings.Cut(l, " "); strings.HasPrefix(n, f.prefix) {
			own = append(own, n)
		}
	}
	return own
}

// TestFabricScript builds the fabric with the script, checks that 64
// source ports cover every spine in both directions (as the kernel itself
// answers with ip route get), runs a real metaroce perf write_bw across it
// with the profile, and removes it.
func TestFabricScript(t *testing.T) {
	testenv.Root(t, "network namespaces, veths, nftables")
	for _, tool := range []string{"ip", "nft", "tc", "bash"} {
		testenv.Tool(t, tool, "scripts/install-deps.sh installs iproute2 and nftables")
	}
	bin := binary.Build(t)
	f := fab{t: t, prefix: fmt.Sprintf("mrfs%d-", os.Getpid()%100000)}
	t.Cleanup(func() {
		cmd := exec.Command("bash", script, "down")
		cmd.Env = append(os.Environ(), "MR_FABRIC_PREFIX="+f.prefix)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("netns-fabric.sh down: %v\n%s", err, out)
		}
		if left := f.namespaces(); len(left) != 0 {
			t.Errorf("down left namespaces %v", left)
		}
	})
	// A larger fabric with impairments first, then the one under test:
	// up is idempotent, shrinks the spine set and clears impairments.
	f.script("up", "--spines", "6", "--loss", "1", "--ce", "1", "--rate", "1gbit")
	f.script("up", "--spines", strconv.Itoa(spines))
	require.Len(t, f.namespaces(), 3+spines, "hosts, two leaves, the spines")
	for i := 1; i <= spines; i++ {
		out, err := exec.Command("ip", "netns", "exec", fmt.Sprintf("%sr%d", f.prefix, i), "nft", "list", "table", "ip", "mrfabric").CombinedOutput()
		require.Error(t, err, "r%d keeps an impairment table after up without --loss/--ce: %s", i, out)
	}

	// 64 source ports, from A through leafA and from B through leafB
	// (dport 4794, the profile's udp.port), reach every spine.
	const ports = 64
	var toB, toA [spines + 1]int
	for p := 49152; p < 49152+ports; p++ {
		toB[f.spineOf("leafA", "a0", "10.1.0.2", "10.2.0.2", p, 4794)]++
		toA[f.spineOf("leafB", "b0", "10.2.0.2", "10.1.0.2", p, 4794)]++
	}
	t.Logf("%d source ports per spine r1..r%d: A->B %v, B->A %v", ports, spines, toB[1:], toA[1:])
	for i := 1; i <= spines; i++ {
		// A spine left idle by 64 ports has probability ~4e-8 (docs/fabric.md).
		require.NotZero(t, toB[i], "A->B: no port of %d hashed to r%d: %v", ports, i, toB[1:])
		require.NotZero(t, toA[i], "B->A: no port of %d hashed to r%d: %v", ports, i, toA[1:])
	}

	// A real perf across the fabric: server and client in the hosts
	// namespace, on 10.2.0.2 and 10.1.0.2 (the profile's addresses).
	const iters = 200
	before := f.spineRx()
	f.perf(bin, iters)
	// The bytes crossed the fabric, not the hosts' loopback: the spines
	// received at least one packet per MTU of data from leafA.
	after := f.spineRx()
	var per [spines]uint64
	var total uint64
	for i := range per {
		per[i] = after[i] - before[i]
		total += per[i]
	}
	t.Logf("perf: packets from leafA per spine %v", per)
	const mtu = 1396 // metaroce.mtu in the profile
	require.GreaterOrEqual(t, total, uint64(iters*65536/mtu), "spines carried the data: %v", per)

	// The impairments act on real traffic: 1% loss and 1% CE on every
	// spine (~50 of each for ~9,400 data packets; none is a ~1e-20 chance)
	// and tbf on r1; metaroce repairs the loss and perf completes.
	f.script("up", "--spines", strconv.Itoa(spines), "--loss", "1", "--ce", "1", "--rate", "1gbit")
	f.perf(bin, iters)
	var drops, marks uint64
	for i := 1; i <= spines; i++ {
		out := f.ip("netns", "exec", fmt.Sprintf("%sr%d", f.prefix, i), "nft", "list", "table", "ip", "mrfabric")
		drops += counter(t, out, "loss")
		marks += counter(t, out, "ce")
	}
	tbfOut, err := exec.Command("tc", "-s", "-n", f.prefix+"r1", "qdisc", "show", "dev", "rb0").CombinedOutput()
	require.NoError(t, err, "tc: %s", tbfOut)
	tbf := string(tbfOut)
	t.Logf("1%% loss, 1%% CE: nftables dropped %d and marked %d; r1: %s", drops, marks, strings.TrimSpace(tbf))
	require.NotZero(t, drops, "nftables dropped nothing")
	require.NotZero(t, marks, "nftables marked nothing CE (metaroce sends ECT(0))")
	require.Regexp(t, `tbf .* rate 1Gbit`, tbf)
	require.NotRegexp(t, `Sent 0 bytes`, tbf, "tbf on r1 passed nothing")

	// --verify over the fabric (every byte of every message checked where
	// it lands, exit 0): at 1% loss on every spine, and with r2's link to
	// leafA taken down mid-run.
	f.script("up", "--spines", strconv.Itoa(spines), "--loss", "1")
	out := f.perf(bin, iters, "--verify")
	drops = 0
	for i := 1; i <= spines; i++ {
		drops += counter(t, f.ip("netns", "exec", fmt.Sprintf("%sr%d", f.prefix, i), "nft", "list", "table", "ip", "mrfabric"), "loss")
	}
	require.NotZero(t, drops, "--verify at 1%% loss: nftables dropped nothing")
	require.NotContains(t, out, "verify:", "a wrong byte at 1%% loss")
	t.Logf("--verify at 1%% loss: exit 0 after nftables dropped %d packets", drops)
	f.script("up", "--spines", strconv.Itoa(spines))
	down := make(chan struct{})
	go func() {
		defer close(down)
		time.Sleep(150 * time.Millisecond)
		_ = exec.Command("ip", "-n", f.prefix+"r2", "link", "set", "ra0", "down").Run()
	}()
	before = f.spineRx()
	out = f.perf(bin, 3000, "--verify")
	<-down
	after = f.spineRx()
	routes := f.ip("-n", f.prefix+"leafA", "route", "show", "10.2.0.0/24")
	require.Contains(t, routes, "linkdown", "r2's nexthop is down: %s", routes)
	require.NotContains(t, out, "verify:", "a wrong byte with a spine down")
	for i := range per {
		per[i] = after[i] - before[i]
	}
	t.Logf("--verify with r2 down mid-run: exit 0; packets from leafA per spine %v", per)
}

var counterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ .*comment "(\w+)"`)

// counter returns the packets of the nftables rule commented name.
func counter(t *testing.T, table, name string) uint64 {
	t.Helper()
	for _, m := range counterRE.FindAllStringSubmatch(table, -1) {
		if m[2] == name {
			v, err := strconv.ParseUint(m[1], 10, 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("no nftables rule %q in:\n%s", name, table)
	return 0
}

// perf runs metaroce perf write_bw, server and client in the hosts
// namespace with the profile, iters messages of 64 KiB, bounded in time.
func (f fab) perf(bin string, iters int, extra ...string) string {
	t := f.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	hosts := f.prefix + "hosts"
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", hosts, bin, "perf", "write_bw", "--profile", profile,
		"--wait", "30s", "--progress", "never")
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	require.NoError(t, srv.Start())
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	args := append([]string{"netns", "exec", hosts, bin, "perf", "write_bw", "--profile", profile,
		"10.2.0.2", "-n", strconv.Itoa(iters), "--progress", "never"}, extra...)
	cli := exec.CommandContext(ctx, "ip", args...)
	out, err := cli.CombinedOutput()
	if err != nil {
		cancel()
		<-srvDone
		t.Fatalf("perf client: %v\n%s\nserver:\n%s", err, out, srvOut.String())
	}
	require.NoError(t, <-srvDone, "perf server:\n%s", srvOut.String())
	t.Logf("perf client:\n%s", out)
	require.Regexp(t, `(?m)^ 65536\s+`+strconv.Itoa(iters)+`\s+[0-9.]+\s+[0-9.]+`, string(out), "a result row")
	require.Contains(t, string(out), "local address: 10.1.0.2:4794")
	require.Contains(t, string(out), "remote address: 10.2.0.2:4794")
	return string(out)
}
