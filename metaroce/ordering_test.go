package metaroce_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The shared ordering and buffer-reuse properties (internal/verbstest) on
// metaroce: one connection of one stream per scenario, sprayed over 1 to
// 16 paths on 1 or 2 planes with an MTU drawn from the seed, so that the
// WRITE's chunks and the message after it race over paths of different
// lengths.
var metaroceOrder = verbstest.OrderHarness{
	Devices: func(t *testing.T, seed uint64, link memlink.Config) (*mempair.Pair, verbs.Device, verbs.Device, int) {
		r := rand.New(rand.NewPCG(seed, 0x6d657461))
		cfg := mr.Config{Paths: 1 + r.IntN(16), Planes: 1 + r.IntN(2), MTU: []int{256, 1024, 4096}[r.IntN(3)]}
		p, err := mempair.New(cfg, cfg, link)
		require.NoError(t, err)
		return p, p.EP[0].Device(), p.EP[1].Device(), cfg.MTU
	},
	Limit: 10e9,
	// Once RTTs are sampled, srtt + 4 rttvar on these links is near
	// MinRTO (50 µs); PeerDeadTimeout (200 ms) is far off.
	RTO: 50e3,
	Describe: func(a, b verbs.Session) string {
		return fmt.Sprintf("A=%+v\nB=%+v", *a.(mr.Session).C.Counters(), *b.(mr.Session).C.Counters())
	},
}

// TestOrderingWriteThenReceiveOrRead: over 1,000 seeds (100 under -short)
// of paths of different lengths, jitter, reordering and loss, a SEND,
// SEND_WITH_IMM or WRITE_WITH_IMM posted after a WRITE on one stream
// completes at the responder only with the WRITE's bytes in place, and a
// READ after a WRITE returns its bytes (IB RC ordering, issue 13).
// METAROCE_ORDER_SEEDS=N[@FIRST] picks the seeds.
func TestOrderingWriteThenReceiveOrRead(t *testing.T) {
	verbstest.Ordering(t, "METAROCE_ORDER_SEEDS", 1000, 100, metaroceOrder)
}

// TestBufferReuseAfterCompletion: a WRITE's target reused once its
// completion and a later SEND's receive are seen never gets an old byte
// back, though copies of the WRITE's packets held on one path arrive
// after the reuse (exactly-once placement, issue 13).
// METAROCE_REUSE_SEEDS=N[@FIRST] picks the seeds.
func TestBufferReuseAfterCompletion(t *testing.T) {
	verbstest.BufferReuse(t, "METAROCE_REUSE_SEEDS", 1000, 100, metaroceOrder)
}
