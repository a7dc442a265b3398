//go:build dpdk

package kernelfabric

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
)

const tapChildEnv = "MR_TAP_CHILD_NS"

// TestTapChecksumOffload runs the transport between two DPDK tap ports
// bridged by the kernel, in a namespace of its own. The tap PMD offers
// IPv4 and UDP checksum offload: A (checksum auto) hands its checksums to
// the port, B (checksum software) verifies every one of them itself, so a
// wrong pseudo-header or offload flag would show as B's udp_checksum
// drops and a stalled transfer. B's own packets travel with software
// checksums and A's port checks them (rx offload flags).
func TestTapChecksumOffload(t *testing.T) {
	if ns := os.Getenv(tapChildEnv); ns != "" {
		tapChild(t)
		return
	}
	testenv.Root(t, "tap offload: network namespace, tap devices, bridge")
	ns := fmt.Sprintf("mrtap%d", os.Getpid()%100000)
	_, err := Run("ip", "netns", "add", ns)
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := Run("ip", "netns", "del", ns); err != nil {
			t.Errorf("removing namespace: %v", err)
		}
	})
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-test.run", "^TestTapChecksumOffload$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), tapChildEnv+"="+ns)
	cmd.WaitDelay = time.Second
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("tap child did not finish in 60s:\n%s", out)
	}
	t.Logf("child output:\n%s", out)
	require.NoError(t, err, "tap child failed")
}

func tapChild(t *testing.T) {
	sh := func(args ...string) {
		_, err := Run(args[0], args[1:]...)
		require.NoError(t, err)
	}
	sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	eal := []string{"--lcores", "0@(0-1)", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrtap%d", os.Getpid()), "--log-level", "lib.eal:error", "--log-level", "pmd.net.tap:error",
		"--vdev", "net_tap0,iface=ta", "--vdev", "net_tap1,iface=tb"}
	var hosts [2]host
	t.Cleanup(func() {
		for _, h := range hosts {
			if h.eng != nil {
				h.eng.Stop()
			}
		}
		for _, h := range hosts {
			if h.eng != nil {
				require.NoError(t, h.eng.Close())
			}
		}
		for _, r := range regions {
			require.NoError(t, r.Free())
		}
		require.NoError(t, dpdk.Cleanup())
	})
	cfgs := [2]dpdkengine.Config{
		{EAL: eal, Ports: []dpdkengine.PortConfig{{Name: "net_tap0", IP: "10.3.0.1/24"}}, Checksum: "auto",
			Neighbours: []dpdkengine.Neighbour{{Peer: 1, IP: "10.3.0.2"}}, PoolSize: 4095},
		{Ports: []dpdkengine.PortConfig{{Name: "net_tap1", IP: "10.3.0.2/24"}}, Checksum: "software", PoolSize: 4095},
	}
	for i := range hosts {
		e, err := dpdkengine.Start(cfgs[i], nil)
		require.NoError(t, err)
		hosts[i].eng = e
	}
	pa, pb := hosts[0].eng.Ports()[0], hosts[1].eng.Ports()[0]
	require.True(t, pa.IPOffload && pa.UDPOffload, "tap offers checksum offload: %+v", pa)
	require.False(t, pb.IPOffload || pb.UDPOffload)
	require.True(t, pb.UDPSoft)
	// The kernel joins the two taps with a bridge. The tap PMD gives the
	// kernel side of each tap the DPDK port's own MAC; the bridge would
	// then take frames to that MAC as its own instead of forwarding them,
	// so the kernel sides get other addresses.
	sh("ip", "link", "add", "br0", "type", "bridge")
	for i, ifc := range []string{"ta", "tb"} {
		sh("ip", "link", "set", ifc, "address", fmt.Sprintf("02:6d:72:00:00:%02x", i+1))
		sh("ip", "link", "set", ifc, "master", "br0")
		sh("ip", "link", "set", ifc, "up")
	}
	sh("ip", "link", "set", "br0", "up")
	for i := range hosts {
		require.NoError(t, hosts[i].eng.WaitLink(10*time.Second))
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: 1024,
			Paths: 8, AcceptIncoming: i == 1, ConnectRetries: 200, ConnectRetry: 20 * time.Millisecond, MinRTO: 2 * time.Millisecond})
		require.NoError(t, err)
		hosts[i].ep = ep
		hosts[i].sh, err = hosts[i].eng.Run(ep)
		require.NoError(t, err)
	}
	var ends [2]end
	for i := range hosts {
		ends[i] = end{ep: hosts[i].ep, do: hosts[i].sh.Do, stats: hosts[i].sh.Stats, peer: 1}
	}
	f := &fabric{t: t, name: "tap", h: ends, alloc: func(n int) []byte { return region(t, n) }}
	f.connect()
	f.transfer(1, load{2 << 20, 256 << 10, 512 << 10}, nil)
	for i := range hosts {
		c, err := hosts[i].sh.Counters()
		require.NoError(t, err)
		t.Logf("host %c: rx %d delivered %d tx %d drops %v", 'A'+i, c.RxFrames, c.RxDelivered, c.TxFrames, c.DropMap())
		require.Zero(t, c.Drops[dpdkengine.DropUDPChecksum], "host %c", 'A'+i)
		require.Zero(t, c.Drops[dpdkengine.DropIPChecksum], "host %c", 'A'+i)
		require.Greater(t, c.RxDelivered, uint64(500))
	}
}
