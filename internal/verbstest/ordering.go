package verbstest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The ordering property (issue 13): InfiniBand RC orders the messages of
// one queue pair, and verbs programs rely on it (write the data, then say
// it is there). So, on one queue pair, under reordering and loss:
//
//   - a receive-consuming message (SEND, SEND_WITH_IMM, WRITE_WITH_IMM)
//     posted after a WRITE completes at the responder only once every byte
//     of that WRITE (and of every earlier message) is in place;
//   - a READ posted after a WRITE of the same range returns the WRITE's
//     bytes.
//
// Completions are polled before every packet the link delivers and after
// every step of the pair, so a completion reported too early is seen
// before a later packet can repair the memory it speaks for.

// OrderHarness is what a core supplies to run the ordering and the
// buffer-reuse properties.
type OrderHarness struct {
	// Devices builds the two devices for seed (the core may draw its own
	// shape from it: paths, planes) joined by a mempair over link: A
	// (handle 0) dials, B (handle 1) accepts. mtu is the payload of one
	// full data packet: the sizes drawn are placed around it.
	Devices func(t *testing.T, seed uint64, link memlink.Config) (p *mempair.Pair, a, b verbs.Device, mtu int)
	// Limit is the virtual time one scenario may take to complete.
	Limit verbs.Time
	// RTO is about the core's retransmit timeout on the harness's links.
	// The buffer-reuse property holds back a path's packets for RTO/2 to
	// 64 RTO: past the timeout, so the sender resends what the path
	// carried and the held originals arrive late, both while the sender
	// still uses the path and after it has given it up.
	RTO verbs.Time
	// Describe, if set, adds the sessions' counters to a failure message.
	Describe func(a, b verbs.Session) string
}

// orderPair is one WRITE and the operation posted right after it on the
// same queue pair, which must see the WRITE's bytes.
type orderPair struct {
	write, next       int // WRITE's size; next's size (READ: the WRITE's)
	woff, noff        int // offsets in B's region: WRITE target, next's target or receive buffer
	op                verbs.WROpcode
	class             string // the WRITE's size class
	imm               uint32
	wsrc, nsrc, rdest int // offsets in A's source (WRITE, next) and READ region
}

// OrderTally is what an ordering run checked.
type OrderTally struct {
	Seeds      int
	Ordered    map[string]int // responder/READ checks by "WRITE->op"
	SizeClass  map[string]int // checked WRITEs by size class
	Requester  int            // send completions checked: their bytes were in place
	FinalBytes int            // bytes compared once the link was empty
}

// orderLink draws the impairments of an ordering scenario: paths of
// different lengths, jitter, sometimes reordering, and a few % loss.
func orderLink(r *rand.Rand, seed uint64) memlink.Config {
	l := memlink.Config{
		Seed:    int64(seed),
		Delay:   2000 + int64(r.IntN(8000)),
		RateBps: 100e9,
		Loss:    []float64{0, 0.01, 0.02, 0.04}[r.IntN(4)],
		Jitter:  []int64{0, 500, 3000, 15000}[r.IntN(4)],
	}
	spread := int64(1 + r.IntN(20000))
	l.PathDelay = func(k memlink.PathKey) int64 { return int64(k.Entropy) * 7919 % spread }
	if r.IntN(3) == 0 {
		l.Reorder, l.ReorderDelay = 0.03, 20000
	}
	return l
}

// drawSize draws a WRITE's size around mtu: 1 B, one MTU, one MTU give or
// take a byte, many MTUs, or an unaligned length.
func drawSize(r *rand.Rand, mtu int) (int, string) {
	switch r.IntN(5) {
	case 0:
		return 1, "1B"
	case 1:
		return mtu, "mtu"
	case 2:
		return mtu - 1 + 2*r.IntN(2), "mtu±1"
	case 3:
		return mtu * (2 + r.IntN(23)), "many-mtu"
	}
	return mtu*r.IntN(17) + 1 + r.IntN(mtu-1), "unaligned"
}

func opName(o verbs.WROpcode) string {
	return [...]string{"WRITE", "WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "READ"}[o]
}

// drawOrder draws 1 to 4 pairs and lays them out: every range has a guard
// gap after it and starts at an offset that is unaligned half the time.
func drawOrder(r *rand.Rand, mtu int) (pairs []orderPair, sizeA, sizeB, sizeR int) {
	next := []verbs.WROpcode{verbs.WRSend, verbs.WRSendImm, verbs.WRWriteImm, verbs.WRRead}
	place := func(at *int, n int) int {
		if r.IntN(2) == 0 {
			*at += 1 + r.IntN(63)
		}
		off := *at
		*at += n + 64
		return off
	}
	for range 1 + r.IntN(4) {
		var p orderPair
		p.write, p.class = drawSize(r, mtu)
		p.op = next[r.IntN(len(next))]
		p.imm = r.Uint32()
		p.woff = place(&sizeB, p.write)
		p.wsrc = place(&sizeA, p.write)
		switch p.op {
		case verbs.WRRead:
			p.next, p.noff = p.write, p.woff
			p.rdest = place(&sizeR, p.write)
		case verbs.WRWriteImm:
			p.next, _ = drawSize(r, mtu)
			p.noff = place(&sizeB, p.next)
			p.nsrc = place(&sizeA, p.next)
		default:
			p.next = 1 + r.IntN(2*mtu)
			p.noff = place(&sizeB, p.next+32) // the receive has room to spare
			p.nsrc = place(&sizeA, p.next)
		}
		pairs = append(pairs, p)
	}
	return pairs, sizeA + 64, sizeB + 64, sizeR + 64
}

// Ordering runs the ordering property over the seeds Seeds(env, n, short)
// names and returns what it checked. Every seed runs to its end; the
// seeds that break the property are reported together at the end, the
// first few in full.
func Ordering(t *testing.T, env string, n, short int, h OrderHarness) OrderTally {
	first, count := Seeds(t, env, n, short)
	sum := OrderTally{Ordered: map[string]int{}, SizeClass: map[string]int{}}
	var failed failures
	wantOrdered := 0
	for seed := first; seed < first+uint64(count); seed++ {
		k, err := orderSeed(t, seed, h, &sum)
		sum.Seeds++
		if err != nil {
			failed.add(seed, err)
			continue
		}
		wantOrdered += k
	}
	failed.check(t, "ordering", env, count)
	got := 0
	for _, c := range sum.Ordered {
		got += c
	}
	require.Equal(t, wantOrdered, got, "every pair's ordering was checked")
	require.Positive(t, got, "ordering checks made")
	if count >= 50 {
		// Enough seeds draw every kind: a draw that stops doing so has
		// stopped testing something.
		for _, op := range []verbs.WROpcode{verbs.WRSend, verbs.WRSendImm, verbs.WRWriteImm, verbs.WRRead} {
			require.Positive(t, sum.Ordered["WRITE->"+opName(op)], "WRITE then %s checked", opName(op))
		}
		for _, c := range []string{"1B", "mtu", "mtu±1", "many-mtu", "unaligned"} {
			require.Positive(t, sum.SizeClass[c], "WRITEs of size class %s checked", c)
		}
	}
	t.Logf("%d seeds: %d ordering checks %v, WRITE sizes %v, %d requester completions checked, %d bytes compared at the end",
		sum.Seeds, got, sum.Ordered, sum.SizeClass, sum.Requester, sum.FinalBytes)
	return sum
}

// orderSeed runs one seed: it returns the number of pairs whose ordering
// it checked, or what broke the property.
func orderSeed(t *testing.T, seed uint64, h OrderHarness, sum *OrderTally) (int, error) {
	r := rand.New(rand.NewPCG(seed, 0x6f72646572))
	link := orderLink(r, seed)
	p, a, b, mtu := h.Devices(t, seed, link)
	pairs, sizeA, sizeB, sizeR := drawOrder(r, mtu)
	name := fmt.Sprintf("mtu=%d delay=%d loss=%.2f jitter=%d reorder=%.2f pairs=%s", mtu, link.Delay, link.Loss, link.Jitter, link.Reorder, describePairs(pairs))
	c := dialOne(t, p, a, b)

	fill := func(n int) []byte {
		x := make([]byte, n)
		for i := range x {
			x[i] = byte(r.Uint32())
		}
		return x
	}
	// B's region starts as before; every source byte differs from the
	// before byte it lands on, so even a 1 B WRITE is seen to land.
	before := fill(sizeB)
	memB := append([]byte(nil), before...)
	srcA := fill(sizeA)
	want := append([]byte(nil), before...)
	for _, pr := range pairs {
		for i := range pr.write {
			srcA[pr.wsrc+i] = before[pr.woff+i] ^ (1 + byte(r.IntN(255)))
		}
		copy(want[pr.woff:], srcA[pr.wsrc:pr.wsrc+pr.write])
		if pr.op != verbs.WRRead {
			for i := range pr.next {
				srcA[pr.nsrc+i] = before[pr.noff+i] ^ (1 + byte(r.IntN(255)))
			}
			copy(want[pr.noff:], srcA[pr.nsrc:pr.nsrc+pr.next])
		}
	}
	readA := fill(sizeR)
	readBefore := append([]byte(nil), readA...)
	mB, err := c.pb.RegisterMR(memB, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	mA, err := c.pa.RegisterMR(srcA, 0)
	require.NoError(t, err)
	mR, err := c.pa.RegisterMR(readA, verbs.AccessLocalWrite)
	require.NoError(t, err)

	// Post: receives first, then WRITE, next, WRITE, next... Work request
	// 2i is pair i's WRITE, 2i+1 what follows it.
	for i, pr := range pairs {
		switch pr.op {
		case verbs.WRSend, verbs.WRSendImm:
			require.NoError(t, c.qb.PostRecv(p.Now, verbs.RecvWR{ID: uint64(2*i + 1), Local: mB.SGE(pr.noff, pr.next+32)}))
		case verbs.WRWriteImm:
			require.NoError(t, c.qb.PostRecv(p.Now, verbs.RecvWR{ID: uint64(2*i + 1)}))
		}
	}
	for i, pr := range pairs {
		require.NoError(t, c.qa.PostSend(p.Now, verbs.SendWR{ID: uint64(2 * i), Opcode: verbs.WRWrite,
			Local: mA.SGE(pr.wsrc, pr.write), RemoteAddr: mB.Addr() + uint64(pr.woff), RKey: mB.RKey()}))
		wr := verbs.SendWR{ID: uint64(2*i + 1), Opcode: pr.op, Imm: pr.imm}
		switch pr.op {
		case verbs.WRRead:
			wr.Local, wr.RemoteAddr, wr.RKey = mR.SGE(pr.rdest, pr.next), mB.Addr()+uint64(pr.noff), mB.RKey()
		case verbs.WRWriteImm:
			wr.Local, wr.RemoteAddr, wr.RKey = mA.SGE(pr.nsrc, pr.next), mB.Addr()+uint64(pr.noff), mB.RKey()
		default:
			wr.Local = mA.SGE(pr.nsrc, pr.next)
		}
		require.NoError(t, c.qa.PostSend(p.Now, wr))
	}

	// placed reports the first byte of op (work request id) not yet in
	// place at B, or -1.
	placed := func(id int) int {
		pr := pairs[id/2]
		off, n := pr.woff, pr.write
		if id%2 == 1 {
			if pr.op == verbs.WRRead {
				return -1
			}
			off, n = pr.noff, pr.next
		}
		if i := firstDiff(memB[off:off+n], want[off:off+n]); i >= 0 {
			return i
		}
		return -1
	}
	var fail error
	var checked, sends, recvs int
	wantRecvs := 0
	for _, pr := range pairs {
		if pr.op != verbs.WRRead {
			wantRecvs++
		}
	}
	var wcs [16]verbs.WorkCompletion
	poll := func() {
		for fail == nil {
			n := c.cqa.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				id := int(wc.WRID)
				if wc.Status != verbs.StatusSuccess || id != sends || id >= 2*len(pairs) {
					fail = violation("wrong requester completion", "%s: at t=%d the requester's completion %d is %+v, want work request %d, success", name, p.Now, sends, wc, sends)
					return
				}
				sends++
				pr := pairs[id/2]
				if id%2 == 1 && pr.op == verbs.WRRead {
					if i := firstDiff(readA[pr.rdest:pr.rdest+pr.next], srcA[pr.wsrc:pr.wsrc+pr.write]); i >= 0 {
						fail = violation("READ returned bytes not the WRITE's", "%s: at t=%d READ %d (%d B) returned byte %d = %#x, not the WRITE's %#x (before the WRITE: %#x)",
							name, p.Now, id, pr.next, i, readA[pr.rdest+i], srcA[pr.wsrc+i], before[pr.woff+i])
						return
					}
					sum.Ordered["WRITE->READ"]++
					sum.SizeClass[pr.class]++
					checked++
					continue
				}
				// A send completion at the requester means the responder
				// has the bytes: nothing of them may still be on its way.
				if i := placed(id); i >= 0 {
					fail = violation("requester completion before its bytes landed", "%s: at t=%d the requester saw %s %d complete while its byte %d had not landed", name, p.Now,
						opName(opOf(pairs, id)), id, i)
					return
				}
				sum.Requester++
			}
			m := c.cqb.Poll(wcs[:])
			for _, wc := range wcs[:m] {
				id := int(wc.WRID)
				if id/2 >= len(pairs) {
					fail = violation("wrong receive completion", "%s: at t=%d receive completion %+v names no work request", name, p.Now, wc)
					return
				}
				pr := pairs[id/2]
				if wc.Status != verbs.StatusSuccess || id%2 != 1 || wc.ByteLen != uint32(pr.next) || wc.HasImm != (pr.op != verbs.WRSend) ||
					(wc.HasImm && wc.Imm != pr.imm) {
					fail = violation("wrong receive completion", "%s: at t=%d receive completion %+v, want work request %d of %d B", name, p.Now, wc, id, pr.next)
					return
				}
				recvs++
				// IB RC: every earlier message of the queue pair, and this
				// one, is fully in place before its receive completes.
				for e := 0; e <= id; e++ {
					if i := placed(e); i >= 0 {
						fail = violation(opName(pr.op)+" receive completed before an earlier WRITE landed", "%s: at t=%d %s %d's receive completed while %s %d (%d B) had byte %d = %#x, not %#x",
							name, p.Now, opName(pr.op), id, opName(opOf(pairs, e)), e, sizeOf(pairs, e), i, byteAt(pairs, e, memB, i), byteAt(pairs, e, want, i))
						return
					}
				}
				sum.Ordered["WRITE->"+opName(pr.op)]++
				sum.SizeClass[pr.class]++
				checked++
			}
			if n == 0 && m == 0 {
				return
			}
		}
	}
	p.RxTap = func(int, []byte) { poll() }
	defer func() { p.RxTap = nil }()
	err = p.RunUntil(func() bool { poll(); return fail != nil || (sends == 2*len(pairs) && recvs == wantRecvs) }, p.Now+h.Limit)
	if fail != nil {
		return 0, fail
	}
	if err != nil {
		return 0, violation("did not complete", "%s: %d/%d send and %d/%d receive completions: %s%s", name, sends, 2*len(pairs), recvs, wantRecvs, err.Error(), c.describe(h))
	}
	// Nothing more may land once the link is empty: compare everything.
	if err := quiesce(p, p.Now+1e6, p.Now+h.Limit); err != nil {
		return 0, violation("did not quiesce", "%s: %v", name, err)
	}
	poll()
	if fail != nil {
		return 0, fail
	}
	if i := firstDiff(memB, want); i >= 0 {
		return 0, violation("wrong bytes at the end", "%s: once the link was empty, B's byte %d = %#x, want %#x", name, i, memB[i], want[i])
	}
	wantR := append([]byte(nil), readBefore...)
	for _, pr := range pairs {
		if pr.op == verbs.WRRead {
			copy(wantR[pr.rdest:], srcA[pr.wsrc:pr.wsrc+pr.write])
		}
	}
	if i := firstDiff(readA, wantR); i >= 0 {
		return 0, violation("wrong bytes at the end", "%s: once the link was empty, A's READ byte %d = %#x, want %#x", name, i, readA[i], wantR[i])
	}
	sum.FinalBytes += len(memB) + len(readA)
	return checked, nil
}

func opOf(pairs []orderPair, id int) verbs.WROpcode {
	if id%2 == 0 {
		return verbs.WRWrite
	}
	return pairs[id/2].op
}

func sizeOf(pairs []orderPair, id int) int {
	if id%2 == 0 {
		return pairs[id/2].write
	}
	return pairs[id/2].next
}

// byteAt is byte i of work request id's range in mem.
func byteAt(pairs []orderPair, id int, mem []byte, i int) byte {
	pr := pairs[id/2]
	if id%2 == 0 {
		return mem[pr.woff+i]
	}
	return mem[pr.noff+i]
}

func describePairs(pairs []orderPair) string {
	var s []string
	for _, p := range pairs {
		s = append(s, fmt.Sprintf("WRITE(%d@%d)->%s(%d@%d)", p.write, p.woff, opName(p.op), p.next, p.noff))
	}
	return strings.Join(s, ",")
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// quiesce runs p until at least from and until the link has nothing in
// flight, by limit at the latest. A pair with nothing left to happen (no
// packet in flight, no timer set) has quiesced too.
func quiesce(p *mempair.Pair, from, limit verbs.Time) error {
	err := p.RunUntil(func() bool { return p.Now >= from && p.Link.InFlight() == 0 }, limit)
	if errors.Is(err, mempair.ErrStalled) && p.Link.InFlight() == 0 {
		return nil
	}
	return err
}

// violationErr is a seed's failure and the kind of it, so that a run
// can say how often each kind was seen.
type violationErr struct{ kind, msg string }

func (v *violationErr) Error() string { return v.msg }

func violation(kind, format string, args ...any) error {
	return &violationErr{kind, fmt.Sprintf(format, args...)}
}

// failures gathers the seeds that broke a property.
type failures struct {
	seeds []uint64
	msgs  []string
	kinds map[string]int
}

func (f *failures) add(seed uint64, err error) {
	f.seeds = append(f.seeds, seed)
	if len(f.msgs) < 8 {
		f.msgs = append(f.msgs, fmt.Sprintf("seed %d: %v", seed, err))
	}
	kind := "other"
	var v *violationErr
	if errors.As(err, &v) {
		kind = v.kind
	}
	if f.kinds == nil {
		f.kinds = map[string]int{}
	}
	f.kinds[kind]++
}

// check fails t with every failure, the first few in full.
func (f *failures) check(t *testing.T, what, env string, count int) {
	t.Helper()
	if len(f.seeds) == 0 {
		return
	}
	var kinds []string
	for k, n := range f.kinds {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(kinds)
	t.Fatalf("the %s property failed on %d of %d seeds (%s=1@SEED reruns one)\nby kind: %s\n%s\nfailing seeds: %s",
		what, len(f.seeds), count, env, strings.Join(kinds, "; "), strings.Join(f.msgs, "\n"), seedList(f.seeds))
}

// seedList names the failing seeds, the first 40 of them.
func seedList(s []uint64) string {
	if len(s) > 40 {
		return fmt.Sprintf("%v ... (%d more)", s[:40], len(s)-40)
	}
	return fmt.Sprint(s)
}

// conn is one established session A->B with one queue pair at each end.
type conn struct {
	sa, sb   verbs.Session
	pa, pb   *verbs.ProtectionDomain
	cqa, cqb *verbs.CompletionQueue
	qa, qb   verbs.QP
}

func (c *conn) describe(h OrderHarness) string {
	if h.Describe == nil {
		return ""
	}
	return "\n" + h.Describe(c.sa, c.sb)
}

// dialOne opens one session of one queue pair from a to b.
func dialOne(t *testing.T, p *mempair.Pair, a, b verbs.Device) *conn {
	t.Helper()
	c := &conn{pa: a.AllocPD(), pb: b.AllocPD(), cqa: verbs.NewCompletionQueue(64), cqb: verbs.NewCompletionQueue(64)}
	var err error
	c.sa, err = a.Dial(p.Now, 1, 1)
	require.NoError(t, err)
	require.NoError(t, p.RunUntil(func() bool {
		if c.sb == nil {
			c.sb, _ = b.Accept()
		}
		return c.sb != nil && c.sa.Established()
	}, p.Now+1e9))
	c.qa, err = c.sa.CreateQP(0, verbs.QPAttr{PD: c.pa, SendCQ: c.cqa, RecvCQ: c.cqa})
	require.NoError(t, err)
	c.qb, err = c.sb.CreateQP(0, verbs.QPAttr{PD: c.pb, SendCQ: c.cqb, RecvCQ: c.cqb})
	require.NoError(t, err)
	return c
}
