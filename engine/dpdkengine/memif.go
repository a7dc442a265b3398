//go:build dpdk

package dpdkengine

import (
	"fmt"
	"strconv"
	"strings"
)

// mbufHeadroom is the headroom before an mbuf's data
// (RTE_PKTMBUF_HEADROOM): data_room less it is what a frame may fill.
const mbufHeadroom = 128

// memifDefaultBufSize is memif's ring buffer size when its vdev has no
// bsize argument (ETH_MEMIF_DEFAULT_PKT_BUFFER_SIZE).
const memifDefaultBufSize = 2048

// memifBufSize is the ring buffer size a memif vdev's arguments
// ("role=server,id=0,bsize=9216,...") give it.
func memifBufSize(devargs string) (int, error) {
	for _, kv := range strings.Split(devargs, ",") {
		if v, ok := strings.CutPrefix(kv, "bsize="); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 0xffff {
				return 0, fmt.Errorf("bsize %q is not a size in 1..65535", v)
			}
			return n, nil
		}
	}
	return memifDefaultBufSize, nil
}

// checkMemifBuf refuses a memif port whose ring buffers are smaller than
// an mbuf's data (data_room less the headroom): every frame the engine
// sends fits an mbuf, so with buffers at least as large none spreads
// over several memif buffers, and DPDK 22.11's memif corrupts such
// frames when they are mixed with one-buffer frames (docs/dpdk.md:
// eth_memif_tx leaves MEMIF_DESC_FLAG_NEXT set on a reused descriptor).
// Of a memif pair it is the client's bsize that sizes the buffers; each
// engine checks its own end's, so both ends must have one large enough.
func checkMemifBuf(name, devargs string, dataRoom int) error {
	bs, err := memifBufSize(devargs)
	if err != nil {
		return fmt.Errorf("dpdk engine: port %s: eal: --vdev %s: %v", name, name, err)
	}
	if need := dataRoom - mbufHeadroom; bs < need {
		return fmt.Errorf("dpdk engine: port %s: memif buffers of %d bytes (bsize) are smaller than an mbuf's data, %d bytes (data_room %d less the headroom): "+
			"DPDK 22.11's memif corrupts frames spread over several buffers (docs/dpdk.md); "+
			"give the port's --vdev in eal bsize=%d (both ends) or lower data_room", name, bs, need, dataRoom, need)
	}
	return nil
}

// memifEAL returns eal with bsize=<data_room less the headroom> added to
// every memif --vdev that has no bsize and whose default buffers would
// be too small (checkMemifBuf), and the names of those vdevs. eal itself
// is not changed. A memif --vdev with a bsize of its own is left as it
// is: if that is too small, openPort refuses the port.
func memifEAL(eal []string, dataRoom int) (out, raised []string) {
	need := dataRoom - mbufHeadroom
	if need <= memifDefaultBufSize {
		return eal, nil
	}
	out = append([]string(nil), eal...)
	for i := 0; i < len(out); i++ {
		arg, j := out[i], i
		if v, ok := strings.CutPrefix(arg, "--vdev="); ok {
			arg = v
		} else if arg == "--vdev" && i+1 < len(out) {
			j = i + 1
			arg = out[j]
			i++
		} else {
			continue
		}
		name, args, _ := strings.Cut(arg, ",")
		if !strings.HasPrefix(name, "net_memif") {
			continue
		}
		if strings.Contains(","+args, ",bsize=") {
			continue
		}
		out[j] += fmt.Sprintf(",bsize=%d", need)
		raised = append(raised, name)
	}
	return out, raised
}
