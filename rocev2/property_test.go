package rocev2_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// The property test of the protocol core (metaroce/property_test.go),
// adapted to the RoCEv2 baseline: random transfers over random impairments
// must put every byte exactly where it belongs, change nothing else, and
// complete every work request exactly once, successfully, in posting order
// per QP. Several QPs between the two hosts are separate connections, each
// with its own UDP source port (so per-path link impairments hit each QP
// separately) and its own DCQCN state.
//
// What metaroce's version exercises and RoCEv2 cannot survive by design is
// left out: a path blackout kills an RC QP (retry exceeded), which is what
// the real thing does; errors_test.go covers that.

type rscenario struct {
	seed    uint64
	qps     int
	mtu     int
	link    memlink.Config
	bursty  bool
	ops     []ropSpec
	retries int
}

type ropSpec struct {
	op   verbs.WROpcode
	qp   int
	size int
	imm  uint32
}

func (s rscenario) String() string {
	return fmt.Sprintf("seed=%d qps=%d mtu=%d loss=%.3f bursty=%v pathdelay=%v reorder=%.3f dup=%.3f corrupt=%.4f ops=%d",
		s.seed, s.qps, s.mtu, s.link.Loss, s.bursty, s.link.PathDelay != nil, s.link.Reorder, s.link.Duplicate, s.link.Corrupt, len(s.ops))
}

// drawRScenario picks sizes log-uniformly from 1 B to maxSize and keeps the
// total at budget bytes.
func drawRScenario(seed uint64, maxSize, budget int) rscenario {
	r := rand.New(rand.NewPCG(seed, 0x726f6365))
	s := rscenario{seed: seed, retries: 7}
	s.qps = 1 + r.IntN(8)
	s.mtu = []int{256, 1024, 4096}[r.IntN(3)]
	s.link = memlink.Config{
		Seed:    int64(seed),
		Delay:   2000 + int64(r.IntN(8000)),
		RateBps: 100e9,
		Loss:    []float64{0, 0.001, 0.01, 0.05, 0.1, 0.2}[r.IntN(6)],
		Corrupt: 0.001,
	}
	if r.IntN(2) == 0 {
		s.link.Reorder, s.link.ReorderDelay = 0.05, 20000
	}
	if r.IntN(2) == 0 {
		s.link.Duplicate = 0.02
	}
	if r.IntN(4) == 0 {
		s.link.Bursty = &memlink.GilbertElliott{PGoodToBad: 0.005, PBadToGood: 0.3, LossBad: 0.8}
		s.bursty = true
	}
	if r.IntN(3) == 0 {
		// QPs on paths of different lengths.
		spread := int64(1 + r.IntN(20000))
		s.link.PathDelay = func(k memlink.PathKey) int64 { return int64(k.Entropy) * 7919 % spread }
	}
	if s.link.Loss >= 0.1 || s.bursty {
		// Beyond IBA's 7 (see Config.RetryCount): at 20 % loss a run of
		// eight failed retries is rare but not negligible over thousands of
		// episodes, and this test is about correctness, not about RC's
		// give-up point (errors_test.go covers that).
		s.retries = 30
	}
	total := 0
	for total < budget {
		size := int(math.Exp2(r.Float64() * math.Log2(float64(maxSize))))
		size = max(1, min(size, maxSize))
		if total+size > budget {
			size = budget - total
		}
		total += size
		s.ops = append(s.ops, ropSpec{op: verbs.WROpcode(r.IntN(5)), qp: r.IntN(s.qps), size: size, imm: r.Uint32()})
	}
	return s
}

func runRScenario(t *testing.T, s rscenario) {
	t.Helper()
	cfg := rocev2.Config{MTU: s.mtu, RetryCount: s.retries, PSNSeed: uint32(s.seed)}
	p, ea, eb := pair(t, cfg, cfg, s.link)
	pa, pb := ea.AllocPD(), eb.AllocPD()
	cqa, cqb := verbs.NewCompletionQueue(1024), verbs.NewCompletionQueue(1024)
	qa := make([]*rocev2.QueuePair, s.qps)
	qb := make([]*rocev2.QueuePair, s.qps)
	index := map[uint32]int{} // QPN at either side -> QP index
	for i := range qa {
		ca, cb := connect(t, p, ea, eb)
		var err error
		qa[i], err = ca.CreateQP(verbs.QPAttr{PD: pa, SendCQ: cqa, RecvCQ: cqa})
		require.NoError(t, err)
		qb[i], err = cb.CreateQP(verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb})
		require.NoError(t, err)
		index[ca.QPN()], index[cb.QPN()+1<<24] = i, i
	}

	const gap = 64
	total := gap
	offs := make([]int, len(s.ops))
	for i, o := range s.ops {
		offs[i] = total
		total += o.size + gap
	}
	rnd := rand.New(rand.NewPCG(s.seed, 99))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
	}
	srcA, dstA, dstB, srcB := make([]byte, total), make([]byte, total), make([]byte, total), make([]byte, total)
	fill(srcA)
	fill(dstA)
	fill(dstB)
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

	sendIDs := make([][]uint64, s.qps)
	recvIDs := make([][]uint64, s.qps)
	for i, o := range s.ops {
		id, off := uint64(i), offs[i]
		wr := verbs.SendWR{ID: id, Opcode: o.op, Imm: o.imm}
		switch o.op {
		case verbs.WRWrite, verbs.WRWriteImm:
			wr.Local = mSrcA.SGE(off, o.size)
			wr.RemoteAddr, wr.RKey = mDstB.Addr()+uint64(off), mDstB.RKey()
		case verbs.WRSend, verbs.WRSendImm:
			wr.Local = mSrcA.SGE(off, o.size)
		case verbs.WRRead:
			wr.Local = mDstA.SGE(off, o.size)
			wr.RemoteAddr, wr.RKey = mSrcB.Addr()+uint64(off), mSrcB.RKey()
		}
		if o.op == verbs.WRWriteImm || o.op == verbs.WRSend || o.op == verbs.WRSendImm {
			room := o.size
			if o.op != verbs.WRWriteImm {
				room = o.size + gap/2
			}
			require.NoError(t, qb[o.qp].PostRecv(p.Now, verbs.RecvWR{ID: id, Local: mDstB.SGE(off, room)}))
			recvIDs[o.qp] = append(recvIDs[o.qp], id)
		}
		require.NoError(t, qa[o.qp].PostSend(p.Now, wr), "op %d", i)
		sendIDs[o.qp] = append(sendIDs[o.qp], id)
	}

	gotSend := make([][]uint64, s.qps)
	gotRecv := make([][]uint64, s.qps)
	seen := map[string]bool{}
	wcs := make([]verbs.WorkCompletion, 256)
	nSend, nRecv, wantRecv := 0, 0, 0
	for _, r := range recvIDs {
		wantRecv += len(r)
	}
	drain := func() {
		for _, side := range []struct {
			cq   *verbs.CompletionQueue
			recv bool
		}{{cqa, false}, {cqb, true}} {
			n := side.cq.Poll(wcs)
			for _, wc := range wcs[:n] {
				require.Equal(t, verbs.StatusSuccess, wc.Status, "%s: %+v", s, wc)
				key := fmt.Sprintf("%v/%d", side.recv, wc.WRID)
				require.False(t, seen[key], "%s: completion twice: %+v", s, wc)
				seen[key] = true
				o := s.ops[wc.WRID]
				if side.recv {
					require.Equal(t, o.qp, index[uint32(wc.QPN)+1<<24])
					require.Equal(t, uint32(o.size), wc.ByteLen, "%s: %+v", s, wc)
					require.Equal(t, o.op != verbs.WRSend, wc.HasImm)
					if wc.HasImm {
						require.Equal(t, o.imm, wc.Imm)
					}
					gotRecv[o.qp] = append(gotRecv[o.qp], wc.WRID)
					nRecv++
				} else {
					require.Equal(t, o.qp, index[uint32(wc.QPN)])
					gotSend[o.qp] = append(gotSend[o.qp], wc.WRID)
					nSend++
				}
			}
		}
	}
	err = p.RunUntil(func() bool { drain(); return nSend == len(s.ops) && nRecv == wantRecv }, 600e9)
	require.NoError(t, err, "%s: %d/%d sends, %d/%d recvs", s, nSend, len(s.ops), nRecv, wantRecv)
	for i := range sendIDs {
		require.Equal(t, sendIDs[i], gotSend[i], "%s: send completions of QP %d out of order", s, i)
		require.Equal(t, recvIDs[i], gotRecv[i], "%s: recv completions of QP %d out of order", s, i)
	}
	wantB := append([]byte(nil), origDstB...)
	wantA := append([]byte(nil), origDstA...)
	for i, o := range s.ops {
		off := offs[i]
		if o.op == verbs.WRRead {
			copy(wantA[off:off+o.size], srcB[off:off+o.size])
		} else {
			copy(wantB[off:off+o.size], srcA[off:off+o.size])
		}
	}
	requireSame(t, s, "B", wantB, dstB)
	requireSame(t, s, "A", wantA, dstA)
	t.Logf("%s: t=%.3fms steps=%d link=%+v", s, float64(p.Now)/1e6, p.Steps(), p.Link.Stats())
}

func requireSame(t *testing.T, s rscenario, side string, want, got []byte) {
	t.Helper()
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: memory at %s differs first at offset %d (want %#x got %#x)", s, side, i, want[i], got[i])
		}
	}
}

// TestPropertyDeliveryUnderImpairments: over many seeds, random QP counts,
// MTUs, message sizes (1 B to 4 MiB), operations (WRITE, SEND, READ, with
// and without immediates) and impairments (loss 0-20 %, bursty loss,
// reordering, duplication, 0.1 % corruption), every byte lands where it
// belongs and every work request completes once, in order per QP.
// ROCEV2_SEEDS=N[@FIRST] widens the search.
func TestPropertyDeliveryUnderImpairments(t *testing.T) {
	seeds, first := 30, uint64(1)
	if testing.Short() {
		seeds = 4
	}
	if v := os.Getenv("ROCEV2_SEEDS"); v != "" {
		if _, err := fmt.Sscanf(v, "%d@%d", &seeds, &first); err != nil {
			_, err = fmt.Sscanf(v, "%d", &seeds)
			require.NoError(t, err, "ROCEV2_SEEDS=%q", v)
		}
	}
	for seed := first; seed < first+uint64(seeds); seed++ {
		s := drawRScenario(seed, 4<<20, 4<<20)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRScenario(t, s) })
	}
}
