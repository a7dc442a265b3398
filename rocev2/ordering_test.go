package rocev2_test

import (
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// The shared ordering and buffer-reuse properties (internal/verbstest) on
// the RoCEv2 baseline, one RC queue pair per scenario with an MTU drawn
// from the seed. RoCEv2 places in PSN order and drops what it has already
// placed, so it is the reference both properties are written against.
var rocev2Order = verbstest.OrderHarness{
	Devices: func(t *testing.T, seed uint64, link memlink.Config) (*mempair.Pair, verbs.Device, verbs.Device, int) {
		r := rand.New(rand.NewPCG(seed, 0x726f6365))
		cfg := rocev2.Config{MTU: []int{256, 1024, 4096}[r.IntN(3)], PSNSeed: uint32(seed)}
		p, ea, eb := pair(t, cfg, cfg, link)
		return p, ea.Device(), eb.Device(), cfg.MTU
	},
	Limit: 10e9,
	// The default local ACK timeout (code 8): 4.096 µs << 8.
	RTO: 1048576,
}

// TestOrderingWriteThenReceiveOrRead: over 1,000 seeds (100 under -short)
// of reordering, jitter and loss, a SEND, SEND_WITH_IMM or WRITE_WITH_IMM
// posted after a WRITE completes at the responder only with the WRITE's
// bytes in place, and a READ after a WRITE returns its bytes.
// ROCEV2_ORDER_SEEDS=N[@FIRST] picks the seeds.
func TestOrderingWriteThenReceiveOrRead(t *testing.T) {
	verbstest.Ordering(t, "ROCEV2_ORDER_SEEDS", 1000, 100, rocev2Order)
}

// TestBufferReuseAfterCompletion: a WRITE's target reused once its
// completion and a later SEND's receive are seen never gets an old byte
// back, though held copies of the WRITE's packets arrive after the reuse.
// ROCEV2_REUSE_SEEDS=N[@FIRST] picks the seeds.
func TestBufferReuseAfterCompletion(t *testing.T) {
	verbstest.BufferReuse(t, "ROCEV2_REUSE_SEEDS", 1000, 100, rocev2Order)
}
