//go:build dpdk

package memifraw

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine/pcap"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

// The raw af_packet pair: the ceiling of the af_packet cells of
// scripts/dpdk-cells.sh, measured the same way as the raw memif pair.
// Run as root (or with MR_RAW_AFPACKET=1, which insists on it), the test
// binary builds a network namespace with a veth pair rawA/rawB in it,
// runs itself again inside it with an af_packet port on each end
// (net_af_packet0 on rawA, net_af_packet1 on rawB) beside the memif
// pairs, and removes the namespace when that run ends, however it ends.
// As in the cells harness the veths have no kernel addresses and an
// nftables ingress chain drops every frame after af_packet's taps have
// copied it, so the kernel's own stack does not route them
// (MR_RAW_KERNEL_RX=on keeps that cost, to measure it).
// MR_RAW_AFPACKET=0 leaves the pair out (its test and benchmark skip).
const (
	afpEnv       = "MR_RAW_AFPACKET"
	afpNSEnv     = "MR_RAW_AFPACKET_NS" // in the run inside: the namespace's name
	afpKernelEnv = "MR_RAW_KERNEL_RX"
	afpMTU       = 1500 // the veths' MTU: frames up to an MTU-1024 data frame and more
)

var afpIfaces = [2]string{"rawA", "rawB"}

// afpacketVdevs are the EAL arguments of the two af_packet ports when
// this process runs inside the namespace, else none.
func afpacketVdevs() []string {
	if os.Getenv(afpNSEnv) == "" {
		return nil
	}
	return []string{"--vdev", "net_af_packet0,iface=" + afpIfaces[0], "--vdev", "net_af_packet1,iface=" + afpIfaces[1],
		"--log-level", "pmd.net.af_packet:error"}
}

// afpWanted: MR_RAW_AFPACKET=1, or root unless MR_RAW_AFPACKET=0.
func afpWanted() bool {
	switch os.Getenv(afpEnv) {
	case "1":
		return true
	case "0":
		return false
	}
	return os.Geteuid() == 0
}

// runInNamespace runs this test binary again inside a namespace of its
// own when afpWanted and this is not that run already; it reports the inner run's exit code and true, or false when
// there is nothing to do.
func runInNamespace() (int, bool) {
	if !afpWanted() || os.Getenv(afpNSEnv) != "" {
		return 0, false
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, afpEnv+"=1: the af_packet pair needs root (a network namespace)")
		return 1, true
	}
	ns := fmt.Sprintf("mrraw%d", os.Getpid())
	sh := func(args ...string) error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := sh("ip", "netns", "add", ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	defer sh("ip", "netns", "del", ns) //nolint:errcheck // best effort at exit
	steps := [][]string{
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"},
		{"ip", "-n", ns, "link", "add", afpIfaces[0], "mtu", fmt.Sprint(afpMTU), "type", "veth", "peer", "name", afpIfaces[1], "mtu", fmt.Sprint(afpMTU)},
		{"ip", "-n", ns, "link", "set", afpIfaces[0], "up"},
		{"ip", "-n", ns, "link", "set", afpIfaces[1], "up"},
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
	}
	if os.Getenv(afpKernelEnv) != "on" {
		rules := fmt.Sprintf("table netdev raw {\n chain in {\n  type filter hook ingress devices = { %s, %s } priority 0; policy accept;\n  counter drop\n }\n}\n",
			afpIfaces[0], afpIfaces[1])
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "nft: %v: %s (scripts/install-deps.sh installs nftables; or %s=on)\n", err, out, afpKernelEnv)
			return 1, true
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, exe}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), afpNSEnv+"="+ns)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), true
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	return 0, true
}

// afpPair starts the two af_packet ports once; it skips outside the
// namespace run.
func afpPair(tb testing.TB) (*dpdk.Pool, [2]dpdk.PortID, []byte) {
	if os.Getenv(afpNSEnv) == "" {
		if os.Getenv(afpEnv) == "0" {
			tb.Skip(afpEnv + "=0: no af_packet pair")
		}
		testenv.Root(tb, "the af_packet pair runs in a network namespace of its own")
		tb.Fatal("not inside the af_packet pair's namespace") // runInNamespace did not run
	}
	afpOnce.Do(func() {
		afpPool, afpPorts, afpErr = startPair("rawafp", "net_af_packet0", "net_af_packet1")
		if afpErr != nil {
			return
		}
		atExit = append(atExit, func() {
			for _, p := range afpPorts {
				p.Stop()
				p.Close()
			}
		})
		var f pcap.Frame
		if f.SrcMAC, afpErr = afpPorts[0].MAC(); afpErr != nil {
			return
		}
		if f.DstMAC, afpErr = afpPorts[1].MAC(); afpErr != nil {
			return
		}
		// The addresses and port of a metaroce data frame; the
		// veths have no addresses, so with the kernel's receive on
		// it routes each frame and drops it, as in the cells.
		f.SrcIP, f.DstIP = [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
		f.SrcPort, f.DstPort = 49152, 4794
		afpHdr = pcap.AppendFrame(nil, f, nil)
		afpErr = waitLinks(afpPorts, linkErr("af_packet link did not come up"))
	})
	require.NoError(tb, afpErr)
	return afpPool, afpPorts, afpHdr
}

var (
	afpOnce  sync.Once
	afpPool  *dpdk.Pool
	afpPorts [2]dpdk.PortID
	afpHdr   []byte
	afpErr   error
)

// TestRawAfPacketMovesFrames: the pair moves frames at all, whole.
func TestRawAfPacketMovesFrames(t *testing.T) {
	pool, ports, hdr := afpPair(t)
	res, err := RunHeader(pool, ports[0], ports[1], hdr, 1142, 20000, 32)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Frames, uint64(20000))
	require.Equal(t, res.Frames*1142, res.Bytes)
	t.Logf("raw af_packet: %d frames of 1142 B in %v (%.3f Mpps, %.2f Gb/s)", res.Frames, res.Elapsed, res.Mpps(), res.Gbps())
}

// BenchmarkRawAfPacket: one op is one frame received, sent from rawA's
// port to rawB's as fast as the sender's queue takes them. 1142 bytes is
// a metaroce data frame at MTU 1024 (1024 payload, 76 transport, 42
// Ethernet/IPv4/UDP), 106 a 64 B message's, 1500 the veths' MTU. It
// reports frames per second and, for the data frame, the goodput a
// transport would have at that rate with 1024 payload bytes in each.
func BenchmarkRawAfPacket(b *testing.B) {
	pool, ports, hdr := afpPair(b)
	for _, size := range []int{106, 1142, 1500} {
		b.Run(fmt.Sprintf("frame=%d", size), func(b *testing.B) {
			res, err := RunHeader(pool, ports[0], ports[1], hdr, size, uint64(b.N), 32)
			require.NoError(b, err)
			b.ReportMetric(res.Mpps()*1e3, "kframes/s")
			b.ReportMetric(res.Gbps(), "frame_Gb/s")
			if size == 1142 {
				b.ReportMetric(res.Mpps()*1e6*1024*8/1e9, "payload1024_Gb/s")
			}
		})
	}
}
