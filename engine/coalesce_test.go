package engine

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// growing is a Coalescer that has left packets of 10 bytes to append.
type growing struct{ left, calls int }

func (g *growing) NextCoalesced(_ verbs.Time, _ []byte, n int) (verbs.TxMeta, bool) {
	g.calls++
	if g.left == 0 {
		return verbs.TxMeta{}, false
	}
	g.left--
	return verbs.TxMeta{Len: n + 10}, true
}

// TestCoalesceStopsAtMaxOrEmpty: Coalesce appends until the datagram
// holds max packets (the first included) or the core has nothing more,
// and asks the core once more only when it stopped for lack of packets.
func TestCoalesceStopsAtMaxOrEmpty(t *testing.T) {
	for _, tc := range []struct{ left, max, appended, calls int }{
		{left: 20, max: 8, appended: 7, calls: 7},
		{left: 3, max: 8, appended: 3, calls: 4},
		{left: 5, max: 1, appended: 0, calls: 0},
		{left: 0, max: 8, appended: 0, calls: 1},
	} {
		g := &growing{left: tc.left}
		meta, k := Coalesce(g, 0, nil, verbs.TxMeta{Len: 100}, tc.max)
		if k != tc.appended || g.calls != tc.calls || meta.Len != 100+10*k {
			t.Errorf("%+v: appended %d in %d calls, length %d", tc, k, g.calls, meta.Len)
		}
	}
}
