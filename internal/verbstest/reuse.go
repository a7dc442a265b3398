package verbstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The buffer-reuse property (issue 13, exactly-once placement): an
// application may reuse a WRITE's target as soon as it is told the data
// arrived, here when the requester has seen the WRITE complete (an
// out-of-band "done" would follow it) and the responder has seen the
// receive of a SEND posted after it complete. From then on no byte of the
// WRITE may be placed again, whatever copies of its packets are still in
// flight.
//
// The copies are forced: one path of the WRITE is held back (memlink.Hold)
// for longer than the sender's retransmit timeout, so the sender resends
// what it carried and the held originals arrive after the reuse. The
// stale copies the responder is handed are counted on the link's side
// (mempair.Pair.RxTap, by their payload), not by the transport: a run in
// which none came proves nothing, and the property fails when no seed had
// one.

// The WRITE's bytes (old), the reuse's (new) and the SEND's: their high
// nibbles differ, so a byte tells which it is, and a WRITE packet is told
// by a run of old bytes in its payload.
func oldByte(i int) byte  { return 0xA0 | byte(i&15) }
func newByte(i int) byte  { return 0x50 | byte(i&15) }
func sendByte(i int) byte { return 0x30 | byte(i&15) }

// staleRun is how many consecutive old bytes mark a packet as carrying
// the WRITE's data: no header holds such a run.
const staleRun = 12

// carriesOld reports whether pkt holds staleRun consecutive bytes of the
// old pattern, each following the one before it.
func carriesOld(pkt []byte) bool {
	run := 0
	for i, x := range pkt {
		switch {
		case x&0xF0 != 0xA0:
			run = 0
			continue
		case run > 0 && x&15 == (pkt[i-1]+1)&15:
			run++
		default:
			run = 1
		}
		if run >= staleRun {
			return true
		}
	}
	return false
}

// ReuseTally is what a buffer-reuse run checked.
type ReuseTally struct {
	Seeds      int
	Stale      int // stale copies of WRITE packets handed to the responder after the reuse
	StaleSeeds int // seeds that had at least one
	Held       uint64
	Bytes      int // target bytes checked once the link was empty
}

// BufferReuse runs the buffer-reuse property over the seeds Seeds(env, n,
// short) names; the seeds that break it are reported together.
func BufferReuse(t *testing.T, env string, n, short int, h OrderHarness) ReuseTally {
	require.Positive(t, h.RTO, "OrderHarness.RTO: how long a path is held depends on it")
	first, count := Seeds(t, env, n, short)
	var sum ReuseTally
	var failed failures
	for seed := first; seed < first+uint64(count); seed++ {
		if err := reuseSeed(t, seed, h, &sum); err != nil {
			failed.add(seed, err)
		}
		sum.Seeds++
	}
	t.Logf("%d seeds: %d stale copies of WRITE packets handed to the responder after the reuse (in %d seeds), %d packets held, %d target bytes checked",
		sum.Seeds, sum.Stale, sum.StaleSeeds, sum.Held, sum.Bytes)
	failed.check(t, "buffer-reuse", env, count)
	require.Positive(t, sum.Stale, "a stale copy of a WRITE packet reached the responder after the reuse")
	return sum
}

// reuseSeed runs one seed and reports what broke the property.
func reuseSeed(t *testing.T, seed uint64, h OrderHarness, sum *ReuseTally) error {
	r := rand.New(rand.NewPCG(seed, 0x7265757365))
	link := memlink.Config{
		Seed:    int64(seed),
		Delay:   2000 + int64(r.IntN(8000)),
		RateBps: 100e9,
		Loss:    []float64{0, 0, 0.01}[r.IntN(3)],
	}
	spread := int64(1 + r.IntN(20000))
	link.PathDelay = func(k memlink.PathKey) int64 { return int64(k.Entropy) * 7919 % spread }
	p, a, b, mtu := h.Devices(t, seed, link)
	size := mtu*(8+r.IntN(57)) + r.IntN(mtu)
	toff := r.IntN(64)
	sendLen := 1 + r.IntN(2*mtu)
	holdAt := 1 + r.IntN(3)                          // hold the path of the WRITE's n-th data packet...
	window := []int64{2000, 10000, 50000}[r.IntN(3)] // ...for this long...
	// ...by RTO/2 to 64 RTO, log-uniform: just past a retransmit timeout
	// the path is still in use when its packets come back; long past it,
	// the sender has given it up.
	extra := int64(math.Exp2(math.Log2(float64(h.RTO)) - 1 + 7*r.Float64()))
	// In a third of the seeds the path then goes down for RTO to 4 RTO and
	// comes back: what it held still arrives, what is sent on it meanwhile
	// is lost, and the sender may give it up and take it back.
	var down int64
	if r.IntN(3) == 0 {
		down = int64(math.Exp2(math.Log2(float64(h.RTO)) + 2*r.Float64()))
	}
	name := fmt.Sprintf("mtu=%d delay=%d loss=%.2f size=%d@%d send=%d hold=path of data packet %d for %dns by %dns, then down for %dns",
		mtu, link.Delay, link.Loss, size, toff, sendLen, holdAt, window, extra, down)
	c := dialOne(t, p, a, b)

	src, _ := Region(t, c.pa, size, oldByte, 0)
	target, tb := Region(t, c.pb, toff+size+64, EE, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	ssrc, _ := Region(t, c.pa, sendLen, sendByte, 0)
	recv, rb := Region(t, c.pb, sendLen+32, EE, verbs.AccessLocalWrite)

	var hold *memlink.Hold
	data := 0
	p.Tap = func(from int, pkt []byte, m verbs.TxMeta) {
		if from != 0 || hold != nil || !carriesOld(pkt) {
			return
		}
		if data++; data == holdAt {
			hold = &memlink.Hold{Entropy: uint16(m.Entropy), Plane: uint8(m.Plane), At: int64(p.Now), Until: int64(p.Now) + window, Extra: extra}
			p.Link.AddHold(*hold)
			if down > 0 {
				p.Link.AddBlackout(memlink.Blackout{Entropy: hold.Entropy, Plane: hold.Plane, At: hold.Until, Until: hold.Until + down})
			}
		}
	}
	var fail error
	reused, wrote, sent, received := false, false, false, false
	var reuseAt verbs.Time
	stale := 0
	var wcs [4]verbs.WorkCompletion
	poll := func() {
		for _, q := range []*verbs.CompletionQueue{c.cqa, c.cqb} {
			for _, wc := range wcs[:q.Poll(wcs[:])] {
				if wc.Status != verbs.StatusSuccess {
					fail = violation("failed completion", "%s: at t=%d %+v", name, p.Now, wc)
					return
				}
				switch wc.WRID {
				case 1:
					wrote = true
				case 2:
					sent = true
				case 3:
					received = true
				}
			}
		}
		if wrote && received && !reused {
			// The application's next use of its buffer.
			for i := range size {
				tb[toff+i] = newByte(i)
			}
			reused, reuseAt = true, p.Now
		}
	}
	p.RxTap = func(to int, pkt []byte) {
		poll()
		if reused && to == 1 && carriesOld(pkt) {
			stale++
		}
	}
	defer func() { p.Tap, p.RxTap = nil, nil }()

	require.NoError(t, c.qb.PostRecv(p.Now, verbs.RecvWR{ID: 3, Local: recv.SGE(0, sendLen+32)}))
	require.NoError(t, c.qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, size),
		RemoteAddr: target.Addr() + uint64(toff), RKey: target.RKey()}))
	require.NoError(t, c.qa.PostSend(p.Now, verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Local: ssrc.SGE(0, sendLen)}))
	err := p.RunUntil(func() bool { poll(); return fail != nil || (reused && sent) }, p.Now+h.Limit)
	if fail != nil {
		return fail
	}
	if err != nil {
		return violation("did not complete", "%s: WRITE done=%v SEND done=%v received=%v: %v%s", name, wrote, sent, received, err, c.describe(h))
	}
	if hold == nil {
		return violation("nothing held", "%s: the WRITE sent fewer than %d data packets: no path was held", name, holdAt)
	}
	// Run until every held packet, and anything sent after it, is out of
	// the link.
	settled := verbs.Time(hold.Until+max(hold.Extra, down)) + 1e6
	if err := quiesce(p, settled, settled+h.Limit); err != nil {
		return violation("did not quiesce", "%s: %v", name, err)
	}
	if fail != nil {
		return fail
	}
	sum.Stale += stale
	if stale > 0 {
		sum.StaleSeeds++
	}
	sum.Held += p.Link.Stats().Held
	sum.Bytes += len(tb)
	for i := range sendLen {
		if rb[i] != sendByte(i) {
			return violation("wrong SEND bytes", "%s: the SEND's byte %d is %#x, want %#x", name, i, rb[i], sendByte(i))
		}
	}
	old, firstOld, firstBad := 0, -1, -1
	for i, x := range tb {
		want := byte(0xEE)
		if i >= toff && i < toff+size {
			want = newByte(i - toff)
		}
		if x != want && firstBad < 0 {
			firstBad = i
		}
		if x&0xF0 == 0xA0 {
			if old++; firstOld < 0 {
				firstOld = i - toff
			}
		}
	}
	if firstBad >= 0 {
		return violation("old bytes in the reused target", "%s: reused at t=%d; %d stale WRITE packets reached B after it; %d bytes of the old pattern in the target once the link was empty (first at WRITE offset %d); first wrong byte at region offset %d = %#x",
			name, reuseAt, stale, old, firstOld, firstBad, tb[firstBad])
	}
	return nil
}
