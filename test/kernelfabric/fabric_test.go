//go:build dpdk

package kernelfabric

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/stretchr/testify/require"
)

const childEnv = "MR_KERNELFABRIC_PREFIX"

// TestKernelFabric runs the kernel-fabric test (fabric.run) over the DPDK
// backend: host A and host B on af_packet ports in the hosts namespace
// (the EAL and its ports must live there, and rte_eal_init runs once per
// process, so the test binary re-runs itself there), the kernel kept off
// hA0/hB0. The namespaces are removed whatever happens.
func TestKernelFabric(t *testing.T) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		child(t, Topology{Prefix: prefix})
		return
	}
	spawn(t, "TestKernelFabric", childEnv, "mrf", 120*time.Second, nil)
}

// host is one DPDK endpoint of the fabric.
type host struct {
	eng *dpdkengine.Engine
	sh  *dpdkengine.Shard
	ep  *metaroce.Endpoint
}

// ring sizes the af_packet receive rings: 8192 frames of 2 KiB (16 MiB)
// each. The PMD's default, 512 frames, overflowed on this 2-core host
// whenever the polling thread was descheduled for a millisecond or two:
// the kernel dropped 16% of B's frames there (PACKET_STATISTICS; DPDK's
// imissed said 0), which the transport then had to repair. A ring is
// host memory, as a NIC's descriptor ring is: size it for the longest
// stall of the poller.
const ring = ",framesz=2048,blocksz=4096,framecnt=8192"

func child(t *testing.T, topo Topology) {
	eal := []string{"--lcores", "0@(0-1)", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrfab%d", os.Getpid()), "--log-level", "lib.eal:error",
		"--vdev", "net_af_packet0,iface=" + HostAIf + ring, "--vdev", "net_af_packet1,iface=" + HostBIf + ring}
	var hosts [2]host
	// Registered first, so it runs last: after the regions' cleanups.
	t.Cleanup(func() {
		for _, h := range hosts {
			if h.eng != nil {
				require.NoError(t, h.eng.Close())
			}
		}
		// Regions only once no shard can place into them any more.
		for _, r := range regions {
			require.NoError(t, r.Free())
		}
		require.NoError(t, dpdk.Cleanup())
	})
	cfgs := [2]dpdkengine.Config{
		{EAL: eal, Ports: []dpdkengine.PortConfig{{Name: "net_af_packet0", IP: HostAIP + "/24", Gateway: HostAGW}},
			Neighbours: []dpdkengine.Neighbour{{Peer: 1, IP: HostBIP}}, PoolSize: 4095, MaxIdleSleep: 50 * time.Microsecond},
		{Ports: []dpdkengine.PortConfig{{Name: "net_af_packet1", IP: HostBIP + "/24", Gateway: HostBGW}},
			PoolSize: 4095, MaxIdleSleep: 50 * time.Microsecond},
	}
	for i := range hosts {
		e, err := dpdkengine.Start(cfgs[i], os.Stderr)
		require.NoError(t, err)
		hosts[i].eng = e
	}
	for i := range hosts {
		require.NoError(t, hosts[i].eng.WaitLink(10*time.Second))
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: 1024,
			Paths: 64, AcceptIncoming: i == 1, ConnectRetries: 200, ConnectRetry: 20 * time.Millisecond,
			PathReprobe: 20 * time.Millisecond, MinRTO: 2 * time.Millisecond})
		require.NoError(t, err)
		hosts[i].ep = ep
		hosts[i].sh, err = hosts[i].eng.Run(ep)
		require.NoError(t, err)
	}
	var ends [2]end
	for i := range hosts {
		h := hosts[i]
		ends[i] = end{ep: h.ep, do: h.sh.Do, stats: h.sh.Stats, peer: 1}
	}
	f := &fabric{t: t, name: "dpdk", topo: topo, h: ends, alloc: func(n int) []byte { return region(t, n) }}
	// Logged and checked even when run fails (FailNow): registered after
	// the engines' cleanup, so it runs before it.
	t.Cleanup(func() {
		for i := range hosts {
			c, err := hosts[i].sh.Counters()
			require.NoError(t, err)
			rs, err := hosts[i].eng.RingStats()
			require.NoError(t, err)
			t.Logf("host %c: rx %d delivered %d tx %d drops %v arp req %d rep %d; af_packet ring: %d sockets, %d frames, %d dropped",
				'A'+i, c.RxFrames, c.RxDelivered, c.TxFrames, c.DropMap(), c.ARPRequestsSent, c.ARPRepliesSent, rs.Sockets, rs.Packets, rs.Drops)
			// The ring is read: the kernel put into it at least every
			// frame the engine received from it.
			require.Equal(t, 1, rs.Sockets, "host %c: the af_packet port's socket is found", 'A'+i)
			require.GreaterOrEqual(t, rs.Packets, c.RxFrames, "host %c: PACKET_STATISTICS counts what the ring received", 'A'+i)
		}
	})
	f.run()
}

// regions are freed by child's cleanup, after the engines have stopped.
var regions []*mempool.Region

func region(t *testing.T, n int) []byte {
	r, err := mempool.NewRegion(n)
	require.NoError(t, err)
	regions = append(regions, r)
	return r.Bytes()
}
