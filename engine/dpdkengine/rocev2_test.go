//go:build dpdk

package dpdkengine

import (
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestRoCEv2OverMemif runs the RoCEv2 baseline on the same engine (UDP
// port 4791). Its ICRC covers IP addresses and the UDP source port, which
// both ends take from the engine (PeerIP, the QP's source port as the
// entropy), so a wrong address would show as ICRC drops. (The receiver
// rebuilds the ICRC pseudo-header from its own view of the flow; that the
// frames on the wire carry a valid ICRC for Wireshark would need a
// capture, which this test does not take.)
func TestRoCEv2OverMemif(t *testing.T) {
	var eng [2]*Engine
	var sh [2]*Shard
	var eps [2]*rocev2.Endpoint
	for i := 0; i < 2; i++ {
		cfg := Config{Ports: []PortConfig{{Name: fmt.Sprintf("net_memif%d", 10+i), IP: ips[i]}}, PoolSize: 4095,
			UDPPort: rocev2.UDPPort}
		if i == 0 {
			cfg.Neighbours = []Neighbour{{Peer: 1, IP: ips[1]}}
		}
		e, err := Start(cfg, nil)
		require.NoError(t, err)
		eng[i] = e
	}
	t.Cleanup(func() { closePair(t, eng) })
	for i := 0; i < 2; i++ {
		require.NoError(t, eng[i].WaitLink(10*time.Second))
		e := eng[i]
		local, _ := parseIP(ips[i])
		// AckTimeoutCode 14 (~67 ms) rather than the core default 8
		// (~1 ms): with 8, eight retries span ~8 ms, shorter than a stall
		// of either process on two shared cores, and the WRITE ended in
		// StatusRetryExceeded in a CI run. The profile for these cells
		// (scripts/dpdk-cells.sh) makes the same choice; the retry logic
		// itself is tested in rocev2/stall_test.go.
		ep, err := rocev2.NewEndpoint(rocev2.Config{LocalIP: rocev2.IPv4(local), MTU: 1024, AcceptIncoming: i == 1,
			AckTimeoutCode: 14,
			PeerIP: func(h verbs.PeerHandle) rocev2.IPv4 {
				ip, _ := e.PeerIP(verbs.PeerHandle(h))
				return rocev2.IPv4(ip)
			}})
		require.NoError(t, err)
		eps[i] = ep
		sh[i], err = e.Run(ep)
		require.NoError(t, err)
	}
	p := &memifPair{t: t, eng: eng, sh: sh}
	t.Cleanup(func() {
		for _, r := range p.regs {
			require.NoError(t, r.Free())
		}
	})
	const n = 1 << 20
	src, dst := p.region(n), p.region(n)
	for i := range src {
		src[i] = byte(i*13 + 1)
	}
	var ca, cb *rocev2.Conn
	require.NoError(t, sh[0].Do(func(now verbs.Time) {
		var err error
		ca, err = eps[0].Connect(now, 1)
		require.NoError(t, err)
	}))
	p.await(1, "accept", 10*time.Second, func(verbs.Time) bool {
		if c, ok := eps[1].Accept(); ok {
			cb = c
		}
		return cb != nil
	})
	p.await(0, "established", 10*time.Second, func(verbs.Time) bool { return ca.Established() })
	var mDst *verbs.MemoryRegion
	require.NoError(t, sh[1].Do(func(verbs.Time) {
		pd := eps[1].AllocPD()
		cq := verbs.NewCompletionQueue(16)
		_, err := cb.CreateQP(verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
		require.NoError(t, err)
		mDst, err = pd.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
	}))
	cqa := verbs.NewCompletionQueue(16)
	require.NoError(t, sh[0].Do(func(now verbs.Time) {
		pd := eps[0].AllocPD()
		qa, err := ca.CreateQP(verbs.QPAttr{PD: pd, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		mSrc, err := pd.RegisterMR(src, 0)
		require.NoError(t, err)
		require.NoError(t, qa.PostSend(now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: mSrc.SGE(0, n),
			RemoteAddr: mDst.Addr(), RKey: mDst.RKey()}))
	}))
	var wc [1]verbs.WorkCompletion
	p.await(0, "WRITE completion", 30*time.Second, func(verbs.Time) bool { return cqa.Poll(wc[:]) == 1 })
	require.Equal(t, verbs.StatusSuccess, wc[0].Status)
	require.Equal(t, src, dst)
	var icrcDrops uint64
	require.NoError(t, sh[1].Do(func(verbs.Time) { icrcDrops = eps[1].Counters().ICRCDrops }))
	require.Zero(t, icrcDrops)
	c, err := sh[1].Counters()
	require.NoError(t, err)
	require.Zero(t, c.Dropped(), "%v", c.DropMap())
}
