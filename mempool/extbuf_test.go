//go:build dpdk

package mempool

import (
	"bytes"
	"runtime"
	"testing"
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
