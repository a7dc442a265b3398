//go:build dpdk

package mempool

import (
	"fmt"
	"io"

	"github.com/metaroce/metaroce/dpdk"
)

// NewMbufPool creates the mbuf pool of a data path: n mbufs of dataRoom
// bytes (0: DPDK's default, 2 KiB + headroom) with a per-lcore cache.
// Under --no-huge it works but writes a warning to warn (when not nil):
// anonymous memory is for tests, not performance, and real NICs cannot DMA
// into it without an IOMMU.
func NewMbufPool(name string, n, dataRoom int, warn io.Writer) (*dpdk.Pool, error) {
	if !dpdk.Initialized() {
		return nil, fmt.Errorf("mempool: pool %q: the EAL is not running", name)
	}
	if dpdk.NoHuge() && warn != nil {
		fmt.Fprintf(warn, "mempool: warning: pool %q is in anonymous memory (--no-huge): for testing only\n", name)
	}
	cache := 256
	if n < 4*cache {
		cache = n / 4
	}
	return dpdk.NewPool(name, n, cache, dataRoom)
}
