//go:build dpdk

package dpdk

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests that touch mempool caches run on a registered, locked thread, as
// the engine shards do.
func onLcore(t *testing.T) {
	runtime.LockOSThread()
	if LcoreID() < 0 {
		require.NoError(t, RegisterThread())
		t.Cleanup(func() { UnregisterThread(); runtime.UnlockOSThread() })
	} else {
		t.Cleanup(runtime.UnlockOSThread)
	}
}

func TestMbufLayout(t *testing.T) {
	offs, txoff := cLayout()
	want := [8]uintptr{offBufAddr, offDataOff, offPort, offOLFlags, offPktLen, offDataLen, offBufLen, offTxOffload}
	require.Equal(t, want, offs)
	var m [128]byte
	mb := (*Mbuf)(unsafePointer(&m[0]))
	mb.SetTxOffload(0, 14, 20, 8)
	require.Equal(t, txoff, readU64(m[offTxOffload:]))
	require.Equal(t, []uint64{RxIPCksumMask, RxIPCksumBad, RxIPCksumGood, RxL4CksumMask, RxL4CksumBad, RxL4CksumGood,
		TxIPv4, TxIPCksum, TxUDPCksum}, cFlags())
}

func TestEALRefusesSecondInit(t *testing.T) {
	require.True(t, Initialized())
	_, err := Init(nil)
	require.ErrorIs(t, err, ErrEALDone)
}

func TestPoolAllocFree(t *testing.T) {
	onLcore(t)
	p, err := NewPool(t.Name(), 511, 0, 0)
	require.NoError(t, err)
	defer p.Free()
	require.Equal(t, 511, p.Available())
	s := make([]*Mbuf, 32)
	require.NoError(t, p.AllocBulk(s))
	require.Equal(t, 511-32, p.Available())
	for _, m := range s {
		require.GreaterOrEqual(t, len(m.Room()), 2048)
		m.SetLen(100)
		require.Len(t, m.Data(), 100)
		require.Equal(t, 100, m.Len())
	}
	FreeBulk(s)
	require.Equal(t, 511, p.Available())
	// All or nothing: more than the pool holds fails and takes none.
	big := make([]*Mbuf, 600)
	require.Error(t, p.AllocBulk(big))
	require.Equal(t, 511, p.Available())

	_, err = NewPool("bad", 0, 0, 0)
	require.Error(t, err)
}

func TestRing(t *testing.T) {
	onLcore(t)
	_, err := NewRing("bad", 1000)
	require.ErrorContains(t, err, "power of two")
	r, err := NewRing(t.Name(), 64)
	require.NoError(t, err)
	defer r.Free()
	p, err := NewPool(t.Name(), 255, 0, 0)
	require.NoError(t, err)
	defer p.Free()
	s := make([]*Mbuf, 100)
	require.NoError(t, p.AllocBulk(s))
	n := r.Enqueue(s)
	require.Equal(t, 63, n) // a ring of 64 holds 63
	require.Equal(t, 63, r.Count())
	out := make([]*Mbuf, 100)
	require.Equal(t, 63, r.Dequeue(out))
	require.Equal(t, s[:63], out[:63])
	FreeBulk(s)
}

func TestRingPortLoopback(t *testing.T) {
	onLcore(t)
	port, err := PortByName("net_ring0")
	require.NoError(t, err)
	_, err = PortByName("nope")
	require.ErrorContains(t, err, "net_ring0")
	p, err := NewPool(t.Name(), 1023, 32, 0)
	require.NoError(t, err)
	defer p.Free()
	info, err := port.Info()
	require.NoError(t, err)
	require.Equal(t, "net_ring", info.Driver)
	require.Error(t, port.Configure(PortConfig{RxQueues: 1, TxQueues: 1, Pool: p, TxOffloads: 1 << 60}))
	require.NoError(t, port.Configure(PortConfig{RxQueues: 1, TxQueues: 1, Pool: p, RxDesc: 256, TxDesc: 256}))
	require.NoError(t, port.Start())
	defer func() { require.NoError(t, port.Stop()) }()
	s := make([]*Mbuf, 32)
	require.NoError(t, p.AllocBulk(s))
	for i, m := range s {
		m.SetLen(64 + i)
		m.Data()[0] = byte(i)
	}
	require.Equal(t, 32, port.TxBurst(0, s))
	out := make([]*Mbuf, 64)
	n := port.RxBurst(0, out)
	require.Equal(t, 32, n)
	for i, m := range out[:n] {
		require.Equal(t, 64+i, m.Len())
		require.Equal(t, byte(i), m.Data()[0])
	}
	FreeBulk(out[:n])
	st, err := port.Stats()
	require.NoError(t, err)
	require.Equal(t, uint64(32), st.IPackets)
	require.Equal(t, uint64(32), st.OPackets)
	xs, err := port.XStats()
	require.NoError(t, err)
	found := false
	for _, x := range xs {
		if x.Name == "rx_good_packets" {
			found = true
			require.Equal(t, uint64(32), x.Value)
		}
	}
	require.True(t, found, "xstats: %v", xs)
}

func TestMemifPair(t *testing.T) {
	onLcore(t)
	p, err := NewPool(t.Name(), 2047, 32, 0)
	require.NoError(t, err)
	defer p.Free()
	var ports [2]PortID
	for i := range ports {
		ports[i], err = PortByName(fmt.Sprintf("net_memif%d", i))
		require.NoError(t, err)
		require.NoError(t, ports[i].Configure(PortConfig{RxQueues: 1, TxQueues: 1, Pool: p, RxDesc: 512, TxDesc: 512}))
		require.NoError(t, ports[i].Start())
	}
	defer stopMemifPair(t, ports)
	deadline := time.Now().Add(10 * time.Second)
	for {
		l0, err0 := ports[0].Link()
		l1, err1 := ports[1].Link()
		require.NoError(t, err0)
		require.NoError(t, err1)
		if l0.Up && l1.Up {
			break
		}
		require.True(t, time.Now().Before(deadline), "memif link did not come up")
		time.Sleep(10 * time.Millisecond)
	}
	mac, err := ports[0].MAC()
	require.NoError(t, err)
	require.NotEqual(t, [6]byte{}, mac)
	s := make([]*Mbuf, 16)
	require.NoError(t, p.AllocBulk(s))
	for i, m := range s {
		m.SetLen(1000)
		m.Data()[999] = byte(i)
	}
	// The link reports up a moment before memif's rings are mapped;
	// until then the queue takes nothing.
	sent := 0
	out := make([]*Mbuf, 32)
	got := 0
	for got < 16 && time.Now().Before(deadline) {
		sent += ports[0].TxBurst(0, s[sent:])
		got += ports[1].RxBurst(0, out[got:])
	}
	require.Equal(t, 16, sent)
	require.Equal(t, 16, got)
	for i, m := range out[:got] {
		require.Equal(t, 1000, m.Len())
		require.Equal(t, byte(i), m.Data()[999])
	}
	FreeBulk(out[:got])
}

func TestPortDevArgs(t *testing.T) {
	for name, want := range map[string]string{
		"net_ring0":  "",
		"net_memif4": "role=server,id=0,bsize=4096,socket=" + filepath.Join(filepath.Dir(memifSock), "memif4.sock"),
	} {
		p, err := PortByName(name)
		require.NoError(t, err)
		require.Equal(t, want, p.DevArgs(), name)
	}
}

func TestMalloc(t *testing.T) {
	b, err := Malloc("mr", 1<<20, 4096)
	require.NoError(t, err)
	require.Len(t, b, 1<<20)
	require.Zero(t, uintptrOf(b)%4096)
	for i := range b {
		require.Zero(t, b[i])
		if i > 4096 {
			break
		}
	}
	b[len(b)-1] = 7
	FreeMem(b)
	_, err = Malloc("mr", 0, 0)
	require.Error(t, err)
}

// stopMemifPair stops a started memif pair (server ports[0], client
// ports[1]): the client first, the server only once its link is down,
// i.e. once the interrupt thread has handled the disconnect: memif's
// disconnect handling races a concurrent stop of the other end.
func stopMemifPair(t *testing.T, ports [2]PortID) {
	require.NoError(t, ports[1].Stop())
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if l, _ := ports[0].Link(); !l.Up {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, ports[0].Stop())
}
