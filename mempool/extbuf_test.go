//go:build dpdk

package mempool

import (
	"bytes"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
)

// TestExtBufZeroCopy attaches slices of a registered region to mbufs, sends
// them through a real port (the ring PMD hands the mbufs themselves to the
// receiver), and checks that the receiver reads the region's own bytes at
// the region's own address (no copy was made) and that every slot reports
// released once the mbufs are freed, not before.
func TestExtBufZeroCopy(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, dpdk.RegisterThread())
	defer dpdk.UnregisterThread()

	var warn bytes.Buffer
	pool, err := NewMbufPool("ext", 1023, 0, &warn)
	require.NoError(t, err)
	defer pool.Free()
	require.Contains(t, warn.String(), "--no-huge")
	port, err := dpdk.PortByName("net_ring0")
	require.NoError(t, err)
	require.NoError(t, port.Configure(dpdk.PortConfig{RxQueues: 1, TxQueues: 1, Pool: pool, RxDesc: 256, TxDesc: 256}))
	require.NoError(t, port.Start())
	defer port.Stop()

	r, err := NewRegion(64 << 10)
	require.NoError(t, err)
	defer r.Free()
	mem := r.Bytes()
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	x, err := NewExtTX(16)
	require.NoError(t, err)
	const n = 8
	ms := dpdk.NewMbufArray(n)
	defer dpdk.FreeMbufArray(ms)
	require.NoError(t, pool.AllocBulk(ms))
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = mem[i*4096 : i*4096+1000+i]
	}
	slots := make([]uint32, n)
	require.NoError(t, x.Attach(ms, bufs, slots))
	for _, s := range slots {
		require.False(t, x.Released(s))
	}
	require.Equal(t, n, port.TxBurst(0, ms))
	out := dpdk.NewMbufArray(2 * n)
	defer dpdk.FreeMbufArray(out)
	got := port.RxBurst(0, out)
	require.Equal(t, n, got)
	for i, m := range out[:got] {
		d := m.Data()
		require.Equal(t, 1000+i, len(d))
		require.Equal(t, unsafe.Pointer(&bufs[i][0]), unsafe.Pointer(&d[0]), "zero copy: the data is the region itself")
		require.Equal(t, bufs[i], d)
	}
	require.Equal(t, n, x.Reclaim(), "still in flight until freed")
	dpdk.FreeBulk(out[:got])
	for _, s := range slots {
		require.True(t, x.Released(s))
	}
	require.Zero(t, x.Reclaim())
	require.NoError(t, x.Free())

	_, err = NewExtTX(0)
	require.Error(t, err)
}

// TestExtChain builds three-segment packets with Chain and Flush (headers,
// the region's bytes by reference, a trailer), sends them through the
// ring PMD and checks the chain's length, the region's in-flight count
// while the receiver holds them, that Region.Free refuses to free under
// the driver, that the ordered reclaim returns every slot once freed, and
// that memory outside a live DPDK region is never lent.
func TestExtChain(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, dpdk.RegisterThread())
	defer dpdk.UnregisterThread()

	pool, err := NewMbufPool("chain", 1023, 0, nil)
	require.NoError(t, err)
	defer pool.Free()
	port, err := dpdk.PortByName("net_ring0")
	require.NoError(t, err)
	require.NoError(t, port.Configure(dpdk.PortConfig{RxQueues: 1, TxQueues: 1, Pool: pool, RxDesc: 256, TxDesc: 256}))
	require.NoError(t, port.Start())
	defer port.Stop()

	r, err := NewRegion(64 << 10)
	require.NoError(t, err)
	mem := r.Bytes()
	require.Same(t, r, RegionOf(mem[100:200]))
	require.Nil(t, RegionOf(make([]byte, 100)), "Go heap")
	require.Nil(t, RegionOf(mem[:0]), "empty")
	anon, err := newRegion(4096, false)
	require.NoError(t, err)
	require.Nil(t, RegionOf(anon.Bytes()), "an mmap region is not DPDK memory")
	require.NoError(t, anon.Free())

	const n = 4
	x, err := NewExtTX(n)
	require.NoError(t, err)
	ms := dpdk.NewMbufArray(3 * n)
	defer dpdk.FreeMbufArray(ms)
	require.NoError(t, pool.AllocBulk(ms))
	heads := dpdk.NewMbufArray(n)
	defer dpdk.FreeMbufArray(heads)
	for i := 0; i < n; i++ {
		h, p, tr := ms[3*i], ms[3*i+1], ms[3*i+2]
		h.SetLen(42)
		tr.SetLen(4)
		require.True(t, x.Chain(h, p, tr, mem[i*4096:i*4096+1000+i], r))
		heads[i] = h
	}
	require.False(t, x.Chain(ms[0], ms[1], ms[2], mem[:10], r), "no slot left")
	require.Equal(t, n, r.InFlight())
	require.True(t, x.Flush())
	require.False(t, x.Flush(), "empty batch")
	require.Equal(t, n, port.TxBurst(0, heads))
	out := dpdk.NewMbufArray(2 * n)
	defer dpdk.FreeMbufArray(out)
	got := port.RxBurst(0, out)
	require.Equal(t, n, got)
	for i, m := range out[:got] {
		require.Equal(t, 42+1000+i+4, m.Len(), "pkt_len covers the chain")
		require.Len(t, m.Data(), 42, "the head segment holds the headers")
	}
	x.ReclaimOrdered()
	require.Equal(t, 0, x.FreeSlots(), "held by the receiver")
	old := freeWait
	freeWait = 20 * time.Millisecond
	require.Error(t, r.Free(), "the driver still holds the region's bytes")
	freeWait = old
	require.Nil(t, RegionOf(mem[:10]), "a region being freed lends nothing")
	dpdk.FreeBulk(out[:got])
	require.Zero(t, r.InFlight())
	x.ReclaimOrdered()
	require.Equal(t, n, x.FreeSlots())
	require.Zero(t, x.InFlight())
	require.NoError(t, r.Free())
	require.NoError(t, x.Free())
}

// TestExtChainAllocs: the per-packet zero-copy work (find the region,
// take a slot, batch, attach, reclaim) allocates nothing.
func TestExtChainAllocs(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	require.NoError(t, dpdk.RegisterThread())
	defer dpdk.UnregisterThread()
	pool, err := NewMbufPool("chainallocs", 255, 0, nil)
	require.NoError(t, err)
	defer pool.Free()
	r, err := NewRegion(1 << 20)
	require.NoError(t, err)
	defer r.Free()
	x, err := NewExtTX(8)
	require.NoError(t, err)
	mem := r.Bytes()
	ms := dpdk.NewMbufArray(3)
	defer dpdk.FreeMbufArray(ms)
	head := dpdk.NewMbufArray(1)
	defer dpdk.FreeMbufArray(head)
	rounds := 0
	allocs := testing.AllocsPerRun(100, func() {
		require.NoError(t, pool.AllocBulk(ms))
		ms[0].SetLen(42)
		ms[2].SetLen(4)
		b := mem[rounds*1024 : rounds*1024+1000]
		if !x.Chain(ms[0], ms[1], ms[2], b, RegionOf(b)) || !x.Flush() {
			t.Fatal("chain failed")
		}
		head[0] = ms[0]
		dpdk.FreeBulk(head) // the driver's free: releases the slot
		x.ReclaimOrdered()
		rounds = (rounds + 1) % 512
	})
	require.Zero(t, allocs)
	require.Equal(t, 8, x.FreeSlots(), "every slot back")
	require.Zero(t, r.InFlight())
	require.NoError(t, x.Free())
}
