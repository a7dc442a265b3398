//go:build dpdk

package dpdk

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIO drives PortID.IO over the ring loopback port (what is sent comes
// back on its receive queue): one call sends, frees and receives; an
// empty receive with a spin keeps polling for at least the spin; a set
// wake word ends the wait before it starts; and the frees go back to the
// pool.
func TestIO(t *testing.T) {
	onLcore(t)
	port, err := PortByName("net_ring0")
	require.NoError(t, err)
	p, err := NewPool(t.Name(), 1023, 0, 0) // no cache: Available is exact
	require.NoError(t, err)
	defer p.Free()
	require.NoError(t, port.Configure(PortConfig{RxQueues: 1, TxQueues: 1, Pool: p, RxDesc: 256, TxDesc: 256}))
	require.NoError(t, port.Start())
	defer func() { require.NoError(t, port.Stop()) }()
	avail := p.Available()

	tx, rx, none := NewMbufArray(8), NewMbufArray(32), NewMbufArray(1)[:0]
	defer FreeMbufArray(tx)
	defer FreeMbufArray(rx)
	require.NoError(t, p.AllocBulk(tx))
	for i, m := range tx {
		m.SetLen(60 + i)
	}
	r := port.IO(0, tx, none, 1, rx, 0, nil)
	require.Equal(t, 8, r.Sent)
	require.Equal(t, 8, r.Got, "the loopback returns the burst in the same call")
	require.Equal(t, 1, r.Polls)
	require.Zero(t, r.Spin)
	for i, m := range rx[:r.Got] {
		require.Equal(t, 60+i, m.Len())
	}

	// Free the 8 in the next call, which finds nothing and waits 1 ms.
	spin := TSCHz() / 1000
	require.NotZero(t, spin)
	r = port.IO(0, none, rx[:8], 1, rx, spin, nil)
	require.Zero(t, r.Sent)
	require.Zero(t, r.Got)
	require.Greater(t, r.Polls, 1, "an empty receive with a spin polls again")
	require.GreaterOrEqual(t, r.Spin, spin, "it waits the whole spin")
	require.Equal(t, avail, p.Available(), "the frees went back to the pool")

	// A set wake word: the wait ends at its first look (a 10 s spin).
	w := NewWord()
	defer w.Free()
	w.Set()
	require.True(t, w.IsSet())
	r = port.IO(0, none, none, 1, rx, 10*TSCHz(), w)
	require.Zero(t, r.Got)
	require.Equal(t, 1, r.Polls)
	require.Zero(t, r.Spin)
	w.Clear()
	require.False(t, w.IsSet())
}
