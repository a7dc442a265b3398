//go:build dpdk

package lcore

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
)

// TestMain starts a real EAL with a worker lcore for the loop and a ring
// loopback port (what the loop transmits, it receives again).
func TestMain(m *testing.M) {
	args := []string{"--lcores", "0@(0-1),1@(0-1)", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry",
		"--file-prefix", fmt.Sprintf("mrlcore%d", os.Getpid()), "--log-level", "lib.eal:error", "--vdev", "net_ring0"}
	if _, err := dpdk.Init(args); err != nil {
		fmt.Fprintln(os.Stderr, "EAL:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "EAL cleanup:", err)
		code = 1
	}
	os.Exit(code)
}

// frame writes an Ethernet/IPv4/UDP frame to dport with source port sport
// (what spraying changes), or an ARP frame when dport is 0.
func frame(b []byte, sport, dport uint16) int {
	clear(b[:64])
	if dport == 0 {
		binary.BigEndian.PutUint16(b[12:], 0x0806)
		return 60
	}
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	b[14] = 0x45
	b[14+9] = 17
	binary.BigEndian.PutUint16(b[34:], sport)
	binary.BigEndian.PutUint16(b[36:], dport)
	return 64
}

func TestSteeringKeepsDestinationPortOnOneShard(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, dpdk.RegisterThread())
	defer dpdk.UnregisterThread()

	_, err := Launch(Config{Lcore: 0, Shards: 1})
	require.ErrorContains(t, err, "main lcore")
	_, err = Launch(Config{Lcore: 7, Shards: 1})
	require.ErrorContains(t, err, "not enabled")
	_, err = Launch(Config{Lcore: 1, Shards: 0})
	require.Error(t, err)

	pool, err := dpdk.NewPool("lc", 2047, 0, 0)
	require.NoError(t, err)
	defer pool.Free()
	port, err := dpdk.PortByName("net_ring0")
	require.NoError(t, err)
	require.NoError(t, port.Configure(dpdk.PortConfig{RxQueues: 1, TxQueues: 1, Pool: pool, RxDesc: 512, TxDesc: 512}))
	require.NoError(t, port.Start())
	defer port.Stop()

	const base, shards = 4794, 3
	l, err := Launch(Config{Lcore: 1, Port: port, Shards: shards, BasePort: base, MaxSleepUs: 50, IdleSpins: 100})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			l.Stop()
		}
	}()

	// Each shard sends through its tx ring frames to every shard's port,
	// with many source ports, plus ARP and a UDP port nobody has.
	const rounds = 20
	want := make([]int, shards)
	ms := dpdk.NewMbufArray(shards + 2)
	defer dpdk.FreeMbufArray(ms)
	for r := 0; r < rounds; r++ {
		for s := 0; s < shards; s++ {
			require.NoError(t, pool.AllocBulk(ms))
			for k := 0; k < shards; k++ {
				ms[k].SetLen(frame(ms[k].Room(), uint16(49152+r*7+s), uint16(base+k)))
				want[k]++
			}
			ms[shards].SetLen(frame(ms[shards].Room(), 1, 0))      // ARP
			ms[shards+1].SetLen(frame(ms[shards+1].Room(), 1, 80)) // not ours
			want[0] += 2
			for off := 0; off < len(ms); {
				off += l.TxRing(s).Enqueue(ms[off:])
			}
		}
	}
	got := make([]int, shards)
	out := dpdk.NewMbufArray(64)
	defer dpdk.FreeMbufArray(out)
	deadline := time.Now().Add(10 * time.Second)
	for total(got) < total(want) && time.Now().Before(deadline) {
		for s := 0; s < shards; s++ {
			n := l.RxRing(s).Dequeue(out)
			for _, m := range out[:n] {
				d := m.Data()
				if binary.BigEndian.Uint16(d[12:]) == 0x0800 {
					if dp := int(binary.BigEndian.Uint16(d[36:])); dp != 80 {
						require.Equal(t, base+s, dp, "frame to port %d reached shard %d", dp, s)
					}
				}
			}
			got[s] += n
			dpdk.FreeBulk(out[:n])
		}
	}
	require.Equal(t, want, got)
	st := l.Stats()
	require.Equal(t, uint64(total(want)), st.RxPackets)
	require.Equal(t, uint64(total(want)), st.TxPackets)
	require.Equal(t, uint64(2*rounds*shards), st.NotSteered)
	require.Zero(t, st.RxRingFull)
	require.Zero(t, st.TxDropped)

	// Idle: the loop backs off into sleeps instead of spinning.
	time.Sleep(20 * time.Millisecond)
	idle := l.Stats().IdleSleeps
	require.Greater(t, idle, uint64(10), "the idle loop sleeps")

	// Frames left in a ring are freed by Stop.
	require.NoError(t, pool.AllocBulk(ms[:1]))
	ms[0].SetLen(frame(ms[0].Room(), 1, base))
	require.Equal(t, 1, l.TxRing(0).Enqueue(ms[:1]))
	time.Sleep(5 * time.Millisecond) // looped back into shard 0's rx ring
	before := pool.Available()
	require.NoError(t, l.Stop())
	stopped = true
	require.Equal(t, before+1, pool.Available(), "Stop freed the frame left in a ring")
}

func total(s []int) int {
	t := 0
	for _, v := range s {
		t += v
	}
	return t
}
