//go:build dpdk

package memifraw

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
)

var (
	rawOnce  sync.Once
	rawPool  *dpdk.Pool
	rawPorts [2]dpdk.PortID
	rawErr   error
)

// rawPair configures memif pair 0 once for the package.
func rawPair(t testing.TB) (*dpdk.Pool, [2]dpdk.PortID) {
	rawOnce.Do(func() {
		rawPool, rawErr = dpdk.NewPool("raw", 8191, 256, 0)
		if rawErr != nil {
			return
		}
		for i := range rawPorts {
			if rawPorts[i], rawErr = dpdk.PortByName([]string{"net_memif0", "net_memif1"}[i]); rawErr != nil {
				return
			}
			if rawErr = rawPorts[i].Configure(dpdk.PortConfig{RxQueues: 1, TxQueues: 1, Pool: rawPool}); rawErr != nil {
				return
			}
			if rawErr = rawPorts[i].Start(); rawErr != nil {
				return
			}

		}
		// Client (memif1) first; the server only after the interrupt
		// thread has handled the disconnect (memif races otherwise).
		atExit = append(atExit, func() {
			rawPorts[1].Stop()
			rawPorts[1].Close()
			time.Sleep(50 * time.Millisecond)
			rawPorts[0].Stop()
			rawPorts[0].Close()
		})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			l0, _ := rawPorts[0].Link()
			l1, _ := rawPorts[1].Link()
			if l0.Up && l1.Up {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		rawErr = errLinkDown
	})
	require.NoError(t, rawErr)
	return rawPool, rawPorts
}

type linkErr string

func (e linkErr) Error() string { return string(e) }

const errLinkDown = linkErr("memif link did not come up")

func TestRawMemifMovesFrames(t *testing.T) {
	pool, ports := rawPair(t)
	res, err := Run(pool, ports[0], ports[1], 1100, 20000, 32)
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Frames, uint64(20000))
	require.Equal(t, res.Frames*1100, res.Bytes)
	t.Logf("raw memif: %d frames of 1100 B in %v (%.2f Mpps, %.1f Gb/s; hugepages=%v)", res.Frames, res.Elapsed, res.Mpps(), res.Gbps(), hugepages)
}
