package verbstest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The property harness both cores' main tests share: a random transfer
// (work requests over several queue pairs, sizes from 1 B to megabytes)
// over a randomly impaired link, driven through the verbs interfaces,
// must put every byte exactly where it belongs, change nothing else, and
// complete every work request exactly once, successfully, in posting
// order per queue pair. Each core draws its own scenarios (what shapes and
// impairments it must survive) with the helpers below and supplies a
// Harness (how to build its devices, how long it may take).

// Op is one work request of a scenario: Opcode on queue pair QP, Size
// bytes, with immediate Imm where the opcode carries one.
type Op struct {
	Opcode verbs.WROpcode
	QP     int
	Size   int
	Imm    uint32
}

// Scenario is one random transfer.
type Scenario struct {
	Seed uint64
	Name string // the drawn shape, named in every message about the run
	QPs  int    // queue pairs at each end
	Link memlink.Config
	Ops  []Op
}

// Harness is what a transport supplies to run a scenario.
type Harness struct {
	// Devices builds the two devices joined by a mempair over link: A
	// (handle 0) dials, B (handle 1) accepts.
	Devices func(t *testing.T, link memlink.Config) (*mempair.Pair, verbs.Device, verbs.Device)
	// QPsPerSession is how many queue pairs one dialed session carries (0:
	// all of them). Sessions are opened one after the other, each run
	// until it is established.
	QPsPerSession int
	// Limit is the virtual time the transfer may take.
	Limit verbs.Time
	// Check, if set, inspects each dialed session once it is established.
	Check func(t *testing.T, a verbs.Session)
	// Describe, if set, adds the sessions' counters to the scenario's log
	// line; Dump, if set, their whole state to a failure message.
	Describe, Dump func(a, b []verbs.Session) string
}

// Tally is what a property run checked: a test that checked nothing fails.
type Tally struct {
	Scenarios int
	Sends     int // send-queue completions checked
	Recvs     int // receive completions checked
	Bytes     int // bytes of placed data compared
}

// DrawLink draws the impairments every core must survive: delay, loss of
// up to 20 %, 0.1 % corruption, and in half the scenarios each,
// reordering and duplication.
func DrawLink(r *rand.Rand, seed uint64) memlink.Config {
	l := memlink.Config{
		Seed:    int64(seed),
		Delay:   2000 + int64(r.IntN(8000)),
		RateBps: 100e9,
		Loss:    []float64{0, 0.001, 0.01, 0.05, 0.1, 0.2}[r.IntN(6)],
		Corrupt: 0.001,
	}
	if r.IntN(2) == 0 {
		l.Reorder, l.ReorderDelay = 0.05, 20000
	}
	if r.IntN(2) == 0 {
		l.Duplicate = 0.02
	}
	return l
}

// BurstyLoss is the Gilbert-Elliott loss the property tests draw.
func BurstyLoss() *memlink.GilbertElliott {
	return &memlink.GilbertElliott{PGoodToBad: 0.005, PBadToGood: 0.3, LossBad: 0.8}
}

// DrawPathDelay gives paths of different lengths in a third of the
// scenarios (spraying, or several queue pairs, then reorders across them).
func DrawPathDelay(r *rand.Rand, l *memlink.Config) {
	if r.IntN(3) == 0 {
		spread := int64(1 + r.IntN(20000))
		l.PathDelay = func(k memlink.PathKey) int64 { return int64(k.Entropy) * 7919 % spread }
	}
}

// DrawOps draws work requests over qps queue pairs until budget bytes:
// sizes log-uniform from 1 B to maxSize so that both tiny and
// multi-megabyte messages appear, opcodes uniform over WRITE, WRITE with
// immediate, SEND, SEND with immediate and READ.
func DrawOps(r *rand.Rand, qps, maxSize, budget int) []Op {
	var ops []Op
	total := 0
	for total < budget {
		size := int(math.Exp2(r.Float64() * math.Log2(float64(maxSize))))
		size = max(1, min(size, maxSize))
		if total+size > budget {
			size = budget - total
		}
		total += size
		ops = append(ops, Op{Opcode: verbs.WROpcode(r.IntN(5)), QP: r.IntN(qps), Size: size, Imm: r.Uint32()})
	}
	return ops
}

// Seeds returns the seeds to run: n from 1 (short under -short), or what
// the environment variable env says as N[@FIRST].
func Seeds(t *testing.T, env string, n, short int) (first uint64, count int) {
	first, count = 1, n
	if testing.Short() {
		count = short
	}
	if v := os.Getenv(env); v != "" {
		if _, err := fmt.Sscanf(v, "%d@%d", &count, &first); err != nil {
			first = 1
			_, err = fmt.Sscanf(v, "%d", &count)
			require.NoError(t, err, "%s=%q", env, v)
		}
	}
	require.Positive(t, count, "%s: no seeds to run", env)
	return first, count
}

// Property runs draw(seed) for each seed as a subtest and requires that
// every scenario ran to its end and that completions were checked.
func Property(t *testing.T, env string, n, short int, draw func(seed uint64) (Scenario, Harness)) Tally {
	first, count := Seeds(t, env, n, short)
	var sum Tally
	for seed := first; seed < first+uint64(count); seed++ {
		s, h := draw(seed)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			got := RunScenario(t, s, h)
			sum.Scenarios++
			sum.Sends += got.Sends
			sum.Recvs += got.Recvs
			sum.Bytes += got.Bytes
		})
	}
	require.Equal(t, count, sum.Scenarios, "scenarios run to their end")
	require.Positive(t, sum.Sends, "send completions checked")
	require.Positive(t, sum.Recvs, "receive completions checked")
	t.Logf("%d scenarios, %d send and %d receive completions, %d bytes checked", sum.Scenarios, sum.Sends, sum.Recvs, sum.Bytes)
	return sum
}

// RunScenario executes s with h and checks every byte and every
// completion; it returns what it checked.
func RunScenario(t *testing.T, s Scenario, h Harness) Tally {
	t.Helper()
	p, a, b := h.Devices(t, s.Link)
	pa, pb := a.AllocPD(), b.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(1024), verbs.NewCompletionQueue(1024)
	qa, qb, sa, sb := open(t, s, h, p, a, b, verbs.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa}, verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb})
	call := func(f func(a, b []verbs.Session) string) string {
		if f == nil {
			return ""
		}
		return f(sa, sb)
	}
	// Completions name their queue pair by QPN, per side.
	indexA, indexB := map[verbs.QPN]int{}, map[verbs.QPN]int{}
	for i := range qa {
		indexA[qa[i].QPN()], indexB[qb[i].QPN()] = i, i
	}
	require.Len(t, indexA, s.QPs, "%s: QPNs at A are distinct", s.Name)
	require.Len(t, indexB, s.QPs, "%s: QPNs at B are distinct", s.Name)

	// Lay every op out at its own offset, with a guard gap between ranges,
	// so "outside the targeted ranges is untouched" can be checked.
	const gap = 64
	total := gap
	offs := make([]int, len(s.Ops))
	for i, o := range s.Ops {
		offs[i] = total
		total += o.Size + gap
	}
	rnd := rand.New(rand.NewPCG(s.Seed, 99))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
	}
	srcA := make([]byte, total) // WRITE/SEND sources at A
	fill(srcA)
	dstA := make([]byte, total) // READ destinations at A
	fill(dstA)
	dstB := make([]byte, total) // WRITE targets and receive buffers at B
	fill(dstB)
	srcB := make([]byte, total) // READ sources at B
	fill(srcB)
	origDstA := append([]byte(nil), dstA...)
	origDstB := append([]byte(nil), dstB...)

	mSrcA, err := pa.RegisterMR(srcA, 0)
	require.NoError(t, err)
	mDstA, err := pa.RegisterMR(dstA, verbs.AccessLocalWrite)
	require.NoError(t, err)
	mDstB, err := pb.RegisterMR(dstB, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	mSrcB, err := pb.RegisterMR(srcB, verbs.AccessRemoteRead)
	require.NoError(t, err)

	sendIDs := make([][]uint64, s.QPs) // per queue pair, posting order
	recvIDs := make([][]uint64, s.QPs)
	for i, o := range s.Ops {
		id, off := uint64(i), offs[i]
		wr := verbs.SendWR{ID: id, Opcode: o.Opcode, Imm: o.Imm}
		switch o.Opcode {
		case verbs.WRWrite, verbs.WRWriteImm:
			wr.Local = mSrcA.SGE(off, o.Size)
			wr.RemoteAddr, wr.RKey = mDstB.Addr()+uint64(off), mDstB.RKey()
		case verbs.WRSend, verbs.WRSendImm:
			wr.Local = mSrcA.SGE(off, o.Size)
		case verbs.WRRead:
			wr.Local = mDstA.SGE(off, o.Size)
			wr.RemoteAddr, wr.RKey = mSrcB.Addr()+uint64(off), mSrcB.RKey()
		}
		if o.Opcode == verbs.WRWriteImm || o.Opcode == verbs.WRSend || o.Opcode == verbs.WRSendImm {
			// Receives are posted with room to spare: the payload must
			// land at the start and nothing may spill past its length.
			room := o.Size
			if o.Opcode != verbs.WRWriteImm {
				room = o.Size + gap/2
			}
			require.NoError(t, qb[o.QP].PostRecv(p.Now, verbs.RecvWR{ID: id, Local: mDstB.SGE(off, room)}))
			recvIDs[o.QP] = append(recvIDs[o.QP], id)
		}
		require.NoError(t, qa[o.QP].PostSend(p.Now, wr), "op %d", i)
		sendIDs[o.QP] = append(sendIDs[o.QP], id)
	}

	gotSend := make([][]uint64, s.QPs)
	gotRecv := make([][]uint64, s.QPs)
	seen := make(map[string]bool)
	wcs := make([]verbs.WorkCompletion, 256)
	nSend, nRecv, wantRecv := 0, 0, 0
	for _, r := range recvIDs {
		wantRecv += len(r)
	}
	drain := func() {
		for _, side := range []struct {
			cq    *verbs.CompletionQueue
			recv  bool
			index map[verbs.QPN]int
		}{{cqa, false, indexA}, {cqb, true, indexB}} {
			n := side.cq.Poll(wcs)
			for _, wc := range wcs[:n] {
				require.Equal(t, verbs.StatusSuccess, wc.Status, "%s: %+v", s.Name, wc)
				key := fmt.Sprintf("%v/%d", side.recv, wc.WRID)
				require.False(t, seen[key], "%s: completion twice: %+v", s.Name, wc)
				seen[key] = true
				require.Less(t, wc.WRID, uint64(len(s.Ops)), "%s: %+v", s.Name, wc)
				o := s.Ops[wc.WRID]
				qp, ok := side.index[wc.QPN]
				require.True(t, ok, "%s: completion names no queue pair: %+v", s.Name, wc)
				require.Equal(t, o.QP, qp, "%s: %+v", s.Name, wc)
				if side.recv {
					require.Equal(t, uint32(o.Size), wc.ByteLen, "%s: %+v", s.Name, wc)
					require.Equal(t, o.Opcode != verbs.WRSend, wc.HasImm)
					if wc.HasImm {
						require.Equal(t, o.Imm, wc.Imm)
					}
					gotRecv[o.QP] = append(gotRecv[o.QP], wc.WRID)
					nRecv++
				} else {
					gotSend[o.QP] = append(gotSend[o.QP], wc.WRID)
					nSend++
				}
			}
		}
	}
	err = p.RunUntil(func() bool { drain(); return nSend == len(s.Ops) && nRecv == wantRecv }, h.Limit)
	require.NoError(t, err, "%s: %d/%d sends, %d/%d recvs\n%s", s.Name, nSend, len(s.Ops), nRecv, wantRecv, call(h.Dump))

	for i := range sendIDs {
		require.Equal(t, sendIDs[i], gotSend[i], "%s: send completions of queue pair %d out of order", s.Name, i)
		require.Equal(t, recvIDs[i], gotRecv[i], "%s: recv completions of queue pair %d out of order", s.Name, i)
	}
	// Every byte where it belongs, nothing else touched.
	wantB := append([]byte(nil), origDstB...)
	wantA := append([]byte(nil), origDstA...)
	for i, o := range s.Ops {
		off := offs[i]
		if o.Opcode == verbs.WRRead {
			copy(wantA[off:off+o.Size], srcB[off:off+o.Size])
		} else {
			copy(wantB[off:off+o.Size], srcA[off:off+o.Size])
		}
	}
	requireSameBytes(t, s, "B", wantB, dstB)
	requireSameBytes(t, s, "A", wantA, dstA)
	t.Logf("%s: t=%.3fms steps=%d link=%+v%s", s.Name, float64(p.Now)/1e6, p.Steps(), p.Link.Stats(), call(h.Describe))
	return Tally{Scenarios: 1, Sends: nSend, Recvs: nRecv, Bytes: len(dstA) + len(dstB)}
}

// open dials sessions from A to B, h.QPsPerSession queue pairs each, one
// after the other, accepts them at B, and creates the scenario's queue
// pairs: queue pair i at A and at B are peers.
func open(t *testing.T, s Scenario, h Harness, p *mempair.Pair, a, b verbs.Device, attrA, attrB verbs.QPAttr) (qa, qb []verbs.QP, sa, sb []verbs.Session) {
	t.Helper()
	per := h.QPsPerSession
	if per <= 0 {
		per = s.QPs
	}
	for len(qa) < s.QPs {
		k := min(per, s.QPs-len(qa))
		d, err := a.Dial(p.Now, 1, k)
		require.NoError(t, err, s.Name)
		var acc []verbs.Session
		room := func() int {
			n := 0
			for _, x := range acc {
				n += x.MaxQPs()
			}
			return n
		}
		require.NoError(t, p.RunUntil(func() bool {
			for room() < k {
				x, ok := b.Accept()
				if !ok {
					break
				}
				acc = append(acc, x)
			}
			return room() >= k && d.Established()
		}, p.Now+1e9), s.Name)
		require.GreaterOrEqual(t, d.MaxQPs(), k, "%s: queue pairs of the dialed session", s.Name)
		require.Len(t, acc, 1, "%s: a dialed session is accepted as one", s.Name)
		if h.Check != nil {
			h.Check(t, d)
		}
		for i := range k {
			q, err := d.CreateQP(i, attrA)
			require.NoError(t, err)
			qa = append(qa, q)
		}
		x := acc[0]
		require.Equal(t, d.Origin(), x.Origin(), "%s: the accepted session is the dialed one", s.Name)
		for i := range k {
			q, err := x.CreateQP(i, attrB)
			require.NoError(t, err)
			qb = append(qb, q)
		}
		sa, sb = append(sa, d), append(sb, x)
	}
	return qa, qb, sa, sb
}

func requireSameBytes(t *testing.T, s Scenario, side string, want, got []byte) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: memory at %s differs first at offset %d (want %#x got %#x)", s.Name, side, i, want[i], got[i])
		}
	}
}
