//go:build dpdk

package dpdkengine

import (
	"math/rand/v2"

	"github.com/metaroce/metaroce/dpdk"
)

// impairer is the receive-path impairment stage: it drops a fraction of
// the packets addressed to us and holds another fraction back until after
// the next receive burst, so they arrive behind later packets. memif never
// loses or reorders, so tests set this from the profile.
type impairer struct {
	loss, reorder float64
	rng           *rand.Rand
	// held are mbufs held back in this poll round; prev those of the round
	// before, delivered at the end of this one.
	held, prev []heldPkt
}

type heldPkt struct {
	m     *dpdk.Mbuf
	plane int
}

const maxHeld = 256

func newImpairer(c Impairment) *impairer {
	if c.Loss == 0 && c.Reorder == 0 {
		return nil
	}
	return &impairer{loss: c.Loss, reorder: c.Reorder, rng: rand.New(rand.NewPCG(c.Seed, 0x696d70)),
		held: make([]heldPkt, 0, maxHeld), prev: make([]heldPkt, 0, maxHeld)}
}

// verdict: 0 deliver, 1 drop, 2 hold.
func (im *impairer) verdict() int {
	if im.loss > 0 && im.rng.Float64() < im.loss {
		return 1
	}
	if im.reorder > 0 && len(im.held) < maxHeld && im.rng.Float64() < im.reorder {
		return 2
	}
	return 0
}
