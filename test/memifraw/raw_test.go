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
		rawPool, rawPorts, rawErr = startPair("raw", "net_memif0", "net_memif1")
		if rawErr != nil {
			return
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
		rawErr = waitLinks(rawPorts, errLinkDown)
	})
	require.NoError(t, rawErr)
	return rawPool, rawPorts
}

// startPair makes a pool named name and configures and starts the two
// ports, one queue each way; on an error the ports may be half set up.
func startPair(name, a, b string) (*dpdk.Pool, [2]dpdk.PortID, error) {
	var ports [2]dpdk.PortID
	pool, err := dpdk.NewPool(name, 8191, 256, 0)
	if err != nil {
		return nil, ports, err
	}
	for i, n := range []string{a, b} {
		if ports[i], err = dpdk.PortByName(n); err != nil {
			return nil, ports, err
		}
		if err = ports[i].Configure(dpdk.PortConfig{RxQueues: 1, TxQueues: 1, Pool: pool}); err != nil {
			return nil, ports, err
		}
		if err = ports[i].Start(); err != nil {
			return nil, ports, err
		}
	}
	return pool, ports, nil
}

// waitLinks waits up to 10 s for both ports' links; down is the error
// when they do not come up.
func waitLinks(ports [2]dpdk.PortID, down error) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l0, _ := ports[0].Link()
		l1, _ := ports[1].Link()
		if l0.Up && l1.Up {
			return nil
		}
	}
	return down
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
