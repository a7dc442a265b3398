//go:build dpdk

package kernelfabric

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dpdk"
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/mempool"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

const childEnv = "MR_KERNELFABRIC_PREFIX"

// TestKernelFabric builds the namespace fabric, then re-runs this test
// binary inside the hosts namespace (the EAL and its af_packet ports must
// live there, and rte_eal_init runs once per process) to do the transfers.
// The namespaces are removed whatever happens.
func TestKernelFabric(t *testing.T) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		child(t, Topology{Prefix: prefix})
		return
	}
	testenv.Root(t, "kernel fabric: network namespaces, veths, nftables")
	for _, tool := range []string{"ip", "nft"} {
		testenv.Tool(t, tool, "scripts/install-deps.sh installs iproute2 and nftables")
	}
	topo := Topology{Prefix: fmt.Sprintf("mrf%d", os.Getpid()%100000)}
	t.Cleanup(func() {
		if err := topo.Destroy(); err != nil {
			t.Errorf("removing namespaces: %v", err)
		}
	})
	require.NoError(t, topo.Create())
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("ip", "netns", "exec", topo.NS("hosts"), self, "-test.run", "^TestKernelFabric$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+topo.Prefix)
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("kernel fabric child did not finish in 120s:\n%s", out)
	}
	t.Logf("child output:\n%s", out)
	require.NoError(t, err, "kernel fabric child failed")
}

// host is one DPDK endpoint of the fabric.
type host struct {
	eng *dpdkengine.Engine
	sh  *dpdkengine.Shard
	ep  *metaroce.Endpoint
}

func child(t *testing.T, topo Topology) {
	eal := []string{"--lcores", "0@(0-1)", "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrfab%d", os.Getpid()), "--log-level", "lib.eal:error",
		"--vdev", "net_af_packet0,iface=" + HostAIf, "--vdev", "net_af_packet1,iface=" + HostBIf}
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
	f := &fabric{t: t, topo: topo, h: hosts}
	f.connect()

	// 1. Spraying spreads one connection over all four spines.
	before, err := topo.SpineRx()
	require.NoError(t, err)
	f.transfer(1, 2<<20, 256<<10, 512<<10)
	after, err := topo.SpineRx()
	require.NoError(t, err)
	var total uint64
	var per [Spines]uint64
	for i := range per {
		per[i] = after[i] - before[i]
		total += per[i]
	}
	t.Logf("spraying: packets from leafA per spine %v (total %d)", per, total)
	for i, n := range per {
		// 64 paths hashed onto 4 spines: a spine gets ~16 of them; below
		// 2 would be a ~1e-5 chance for a working spray.
		require.Greater(t, n, total/32, "spine r%d carried too little of the connection: %v", i+1, per)
	}

	// 2. 1% loss in leafA (nftables), both directions: repaired, every
	// byte correct.
	require.NoError(t, topo.AddLoss(10))
	resent0 := f.retransmits()
	f.transfer(2, 4<<20, 512<<10, 1<<20)
	drops, err := topo.LossDrops()
	require.NoError(t, err)
	resent := f.retransmits() - resent0
	t.Logf("1%% loss: nftables dropped %d packets, the transport resent %d, every byte verified", drops, resent)
	require.NotZero(t, drops)
	require.NotZero(t, resent)
	require.NoError(t, topo.RemoveLoss())

	// 3. One spine's link down: no work request fails.
	fail0 := f.pathFailures()
	require.NoError(t, topo.SpineLinkDown(2))
	before, err = topo.SpineRx()
	require.NoError(t, err)
	f.transfer(3, 2<<20, 256<<10, 512<<10)
	after, err = topo.SpineRx()
	require.NoError(t, err)
	for i := range per {
		per[i] = after[i] - before[i]
	}
	t.Logf("r2 link down: packets from leafA per spine %v; path failures detected %d; every work request succeeded", per, f.pathFailures()-fail0)
	routes, err := topo.InNS("leafA", "ip", "route", "show", "10.2.0.0/24")
	require.NoError(t, err)
	require.Contains(t, routes, "linkdown", "leafA marks the nexthop over r2: %s", routes)
	for i, n := range per {
		if i != 1 {
			require.NotZero(t, n, "spine r%d still carries traffic: %v", i+1, per)
		}
	}
	for i := range hosts {
		c, err := hosts[i].sh.Counters()
		require.NoError(t, err)
		t.Logf("host %c: rx %d delivered %d tx %d drops %v arp req %d rep %d", 'A'+i, c.RxFrames, c.RxDelivered, c.TxFrames, c.DropMap(), c.ARPRequestsSent, c.ARPRepliesSent)
	}
}

type fabric struct {
	t      *testing.T
	topo   Topology
	h      [2]host
	ca, cb *metaroce.Conn
}

func (f *fabric) await(i int, what string, limit time.Duration, cond func(now verbs.Time) bool) {
	deadline := time.Now().Add(limit)
	for {
		ok := false
		require.NoError(f.t, f.h[i].sh.Do(func(now verbs.Time) { ok = cond(now) }))
		if ok {
			return
		}
		require.True(f.t, time.Now().Before(deadline), "%s: not done after %v", what, limit)
		time.Sleep(time.Millisecond)
	}
}

func (f *fabric) connect() {
	require.NoError(f.t, f.h[0].sh.Do(func(now verbs.Time) {
		var err error
		f.ca, err = f.h[0].ep.Connect(now, 1)
		require.NoError(f.t, err)
	}))
	f.await(1, "accept", 20*time.Second, func(verbs.Time) bool {
		if c, ok := f.h[1].ep.Accept(); ok {
			f.cb = c
		}
		return f.cb != nil
	})
	f.await(0, "established", 20*time.Second, func(verbs.Time) bool { return f.ca.Established() })
}

func (f *fabric) retransmits() (n uint64) {
	require.NoError(f.t, f.h[0].sh.Do(func(verbs.Time) { n = f.ca.Counters().Retransmits }))
	var m uint64
	require.NoError(f.t, f.h[1].sh.Do(func(verbs.Time) { m = f.cb.Counters().Retransmits }))
	return n + m
}

func (f *fabric) pathFailures() (n uint64) {
	require.NoError(f.t, f.h[0].sh.Do(func(verbs.Time) { n = f.ca.Counters().PathFailures }))
	var m uint64
	require.NoError(f.t, f.h[1].sh.Do(func(verbs.Time) { m = f.cb.Counters().PathFailures }))
	return n + m
}

// regions are freed by child's cleanup, after the engines have stopped.
var regions []*mempool.Region

func region(t *testing.T, n int) []byte {
	r, err := mempool.NewRegion(n)
	require.NoError(t, err)
	regions = append(regions, r)
	return r.Bytes()
}

// transfer: A WRITEs w bytes and SENDs s bytes (4 messages) to B and READs
// r bytes from B on a new stream; every work request must succeed, every
// byte must match and each must have been placed exactly once.
func (f *fabric) transfer(stream metaroce.StreamID, w, s, r int) {
	t := f.t
	rng := rand.New(rand.NewPCG(uint64(stream), 9))
	srcA, dstB := region(t, w+s), region(t, w+s)
	srcB, dstA := region(t, r), region(t, r)
	for i := range srcA {
		srcA[i] = byte(rng.Uint32())
	}
	for i := range srcB {
		srcB[i] = byte(rng.Uint32())
	}
	const msgs = 4
	var qa, qb *metaroce.QueuePair
	cqa, cqb := verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	var mSrcB, mDstB *verbs.MemoryRegion
	var placedA, placedB uint64
	require.NoError(t, f.h[1].sh.Do(func(now verbs.Time) {
		placedB = f.cb.Counters().PayloadPlaced
		pd := f.h[1].ep.AllocPD()
		var err error
		qb, err = f.cb.CreateQP(stream, verbs.QPAttr{PD: pd, SendCQ: cqb, RecvCQ: cqb})
		require.NoError(t, err)
		mSrcB, err = pd.RegisterMR(srcB, verbs.AccessRemoteRead)
		require.NoError(t, err)
		mDstB, err = pd.RegisterMR(dstB, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		for i := 0; i < msgs; i++ {
			require.NoError(t, qb.PostRecv(now, verbs.RecvWR{ID: uint64(i), Local: mDstB.SGE(w+i*s/msgs, s/msgs)}))
		}
	}))
	require.NoError(t, f.h[0].sh.Do(func(now verbs.Time) {
		placedA = f.ca.Counters().PayloadPlaced
		pd := f.h[0].ep.AllocPD()
		var err error
		qa, err = f.ca.CreateQP(stream, verbs.QPAttr{PD: pd, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		mSrcA, err := pd.RegisterMR(srcA, 0)
		require.NoError(t, err)
		mDstA, err := pd.RegisterMR(dstA, verbs.AccessLocalWrite)
		require.NoError(t, err)
		require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: mSrcA.SGE(0, w),
			RemoteAddr: mDstB.Addr(), RKey: mDstB.RKey()}))
		for i := 0; i < msgs; i++ {
			require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 10 + uint64(i), Opcode: verbs.WRSend, Local: mSrcA.SGE(w+i*s/msgs, s/msgs)}))
		}
		require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 2, Opcode: verbs.WRRead, Local: mDstA.SGE(0, r),
			RemoteAddr: mSrcB.Addr(), RKey: mSrcB.RKey()}))
	}))
	var wcs [16]verbs.WorkCompletion
	gotA, gotB := 0, 0
	f.await(0, fmt.Sprintf("stream %d sender completions", stream), 60*time.Second, func(verbs.Time) bool {
		n := cqa.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status, "stream %d wr %d", stream, wc.WRID)
		}
		gotA += n
		return gotA == msgs+2
	})
	f.await(1, fmt.Sprintf("stream %d receiver completions", stream), 10*time.Second, func(verbs.Time) bool {
		n := cqb.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			require.Equal(t, verbs.StatusSuccess, wc.Status)
		}
		gotB += n
		return gotB == msgs
	})
	require.Equal(t, srcA, dstB, "WRITE/SEND bytes")
	require.Equal(t, srcB, dstA, "READ bytes")
	// Each byte placed at least once; a payload that comes back on another
	// path after a lost ACK is placed again (same bytes): logged.
	var extraA, extraB uint64
	require.NoError(t, f.h[1].sh.Do(func(verbs.Time) {
		got := f.cb.Counters().PayloadPlaced - placedB
		require.GreaterOrEqual(t, got, uint64(w+s), "B placed every byte")
		extraB = got - uint64(w+s)
	}))
	require.NoError(t, f.h[0].sh.Do(func(verbs.Time) {
		got := f.ca.Counters().PayloadPlaced - placedA
		require.GreaterOrEqual(t, got, uint64(r), "A placed every byte")
		extraA = got - uint64(r)
	}))
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, f.h[0].sh.Do(func(verbs.Time) { require.Zero(t, cqa.Len(), "extra completions at A") }))
	require.NoError(t, f.h[1].sh.Do(func(verbs.Time) { require.Zero(t, cqb.Len(), "extra completions at B") }))
	t.Logf("stream %d: %d+%d+%d bytes verified; payload bytes placed again (duplicates): A %d, B %d", stream, w, s, r, extraA, extraB)
}
