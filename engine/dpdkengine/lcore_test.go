//go:build dpdk

package dpdkengine

import (
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestLcoreShards: each engine runs a C lcore loop owning its memif
// queues and two Go shards fed through rte_rings. Shard k of A talks to
// shard k of B; both pairs transfer verified data at the same time over
// 16 sprayed paths, and the loops' steering on the UDP destination port
// keeps every packet of a connection on its shard (a frame steered to the
// wrong shard would be dropped there as wrong_port, and none is).
func TestLcoreShards(t *testing.T) {
	const shards = 2
	var eng [2]*Engine
	var sh [2][]*Shard
	var eps [2][]*metaroce.Endpoint
	var pairs []*memifPair
	t.Cleanup(func() { // after the engines stop (registered first, runs last)
		for _, p := range pairs {
			for _, r := range p.regs {
				require.NoError(t, r.Free())
			}
		}
	})
	for i := 0; i < 2; i++ {
		cfg := Config{Ports: []PortConfig{{Name: fmt.Sprintf("net_memif%d", 6+i), IP: ips[i]}}, PoolSize: 8191,
			MaxIdleSleep: 50 * time.Microsecond}
		if i == 0 {
			cfg.Neighbours = []Neighbour{{Peer: 1, IP: ips[1]}}
		}
		e, err := Start(cfg, nil)
		require.NoError(t, err)
		eng[i] = e
	}
	// Shut both down in the one safe order (see closePair).
	t.Cleanup(func() { closePair(t, eng) })
	for i := 0; i < 2; i++ {
		require.NoError(t, eng[i].WaitLink(10*time.Second))
		var trs []verbs.Transport
		for k := 0; k < shards; k++ {
			ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(10*k + i + 1), Incarnation: 1, MTU: 1024,
				Paths: 16, AcceptIncoming: i == 1, ConnectRetries: 1000})
			require.NoError(t, err)
			eps[i] = append(eps[i], ep)
			trs = append(trs, ep)
		}
		var err error
		sh[i], err = eng[i].RunSharded(trs, []int{1 + i})
		require.NoError(t, err)
	}
	_, err := eng[0].RunSharded(nil, []int{1})
	require.Error(t, err, "shards already run")

	done := make(chan struct{}, shards)
	res := make([]xferResult, shards)
	for k := 0; k < shards; k++ {
		p := &memifPair{t: t, eng: eng, sh: [2]*Shard{sh[0][k], sh[1][k]}, ep: [2]*metaroce.Endpoint{eps[0][k], eps[1][k]}}
		pairs = append(pairs, p)
		go func() {
			defer func() { done <- struct{}{} }()
			res[k] = p.transfer(xfer{writeN: 1 << 20, sendN: 128 << 10, sendMsgs: 2, readN: 512 << 10}, uint64(k))
		}()
	}
	for k := 0; k < shards; k++ {
		<-done
	}
	for i := 0; i < 2; i++ {
		ls := eng[i].LoopStats()
		require.Len(t, ls, 1)
		t.Logf("engine %d loop: rx %d tx %d per shard %v not steered %d ring full %d tx dropped %d idle sleeps %d",
			i, ls[0].RxPackets, ls[0].TxPackets, ls[0].PerShard, ls[0].NotSteered, ls[0].RxRingFull, ls[0].TxDropped, ls[0].IdleSleeps)
		require.Zero(t, ls[0].RxRingFull)
		require.Zero(t, ls[0].TxDropped, "a full queue pushes back, it does not drop")
		for k := 0; k < shards; k++ {
			require.Greater(t, ls[0].PerShard[k], uint64(500), "shard %d got its traffic", k)
			c, err := sh[i][k].Counters()
			require.NoError(t, err)
			require.Zero(t, c.Drops[DropWrongPort], "shard %d of %d: misrouted frames", k, i)
			require.Zero(t, c.Dropped(), "shard %d of %d: %v", k, i, c.DropMap())
		}
	}
	// Spraying used many source ports for each connection, yet each
	// connection stayed on its shard (checked above): show the spread.
	require.NoError(t, sh[0][1].Do(func(verbs.Time) {
		used := 0
		c := res[1].ca
		for pth := 0; pth < c.NumPaths(); pth++ {
			if c.PathCounters(verbs.PathID(pth)).TxPackets > 0 {
				used++
			}
		}
		require.GreaterOrEqual(t, used, 8, "packets sprayed over paths (source ports)")
	}))
}
