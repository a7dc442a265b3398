//go:build dpdk

package dpdkengine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestMemifPropertyScenarios draws transfers the way the core's property
// test does (random MTU, paths, streams, operation mix, log-uniform sizes,
// receive-path loss and reordering) and runs each over a real memif pair:
// every byte lands where it belongs, nothing else changes, every work
// request completes once, successfully, in order within its stream.
func TestMemifPropertyScenarios(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runScenario(t, seed, int(5+seed)) })
	}
}

type op struct {
	kind   verbs.WROpcode // WRWrite, WRSend or WRRead
	stream int
	size   int
	off    int // offset in the source (WRITE/SEND: A's, READ: B's) and destination
}

func runScenario(t *testing.T, seed uint64, pair int) {
	rng := rand.New(rand.NewPCG(seed, 0x70726f70))
	imp := Impairment{Seed: seed}
	switch seed % 3 { // every impairment case among the seeds
	case 1:
		imp.Loss = 0.01
	case 2:
		imp.Loss, imp.Reorder = 0.03, 0.05
	}
	mtu := []int{256, 512, 1024, 1800}[rng.IntN(4)]
	paths := 1 + rng.IntN(32)
	streams := 1 + rng.IntN(4)
	var ops []op
	var outN, inN int // bytes A sends (WRITE+SEND), bytes A reads
	for n := 5 + rng.IntN(16); len(ops) < n; {
		o := op{kind: []verbs.WROpcode{verbs.WRWrite, verbs.WRSend, verbs.WRRead}[rng.IntN(3)],
			stream: rng.IntN(streams), size: 1 + int(math.Exp(rng.Float64()*math.Log(192<<10)))}
		if o.kind == verbs.WRRead {
			o.off, inN = inN, inN+o.size
		} else {
			o.off, outN = outN, outN+o.size
		}
		ops = append(ops, o)
	}
	t.Logf("mtu %d paths %d streams %d ops %d out %d in %d loss %.2f reorder %.2f", mtu, paths, streams, len(ops), outN, inN, imp.Loss, imp.Reorder)

	p := newMemifPairPaths(t, pair, imp, mtu, paths)
	srcA, dstBAll := p.region(max(outN, 1)), p.region(max(outN, 1)+2*guard)
	srcB, dstAAll := p.region(max(inN, 1)), p.region(max(inN, 1)+2*guard)
	fillGuard(dstBAll)
	fillGuard(dstAAll)
	for i := range srcA {
		srcA[i] = byte(rng.Uint32())
	}
	for i := range srcB {
		srcB[i] = byte(rng.Uint32())
	}
	ca, cb := p.connect()

	cqa, cqb := verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	var mSrcB, mDstB *verbs.MemoryRegion
	require.NoError(t, p.sh[1].Do(func(now verbs.Time) {
		pd := p.ep[1].AllocPD()
		var err error
		mSrcB, err = pd.RegisterMR(srcB, verbs.AccessRemoteRead)
		require.NoError(t, err)
		mDstB, err = pd.RegisterMR(dstBAll, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		require.NoError(t, err)
		for s := 0; s < streams; s++ {
			q, err := cb.CreateQP(metaroce.StreamID(s), verbs.QPAttr{PD: pd, SendCQ: cqb, RecvCQ: cqb})
			require.NoError(t, err)
			for i, o := range ops {
				if o.kind == verbs.WRSend && o.stream == s {
					require.NoError(t, q.PostRecv(now, verbs.RecvWR{ID: uint64(i), Local: mDstB.SGE(guard+o.off, o.size)}))
				}
			}
		}
	}))
	require.NoError(t, p.sh[0].Do(func(now verbs.Time) {
		pd := p.ep[0].AllocPD()
		mSrcA, err := pd.RegisterMR(srcA, 0)
		require.NoError(t, err)
		mDstA, err := pd.RegisterMR(dstAAll, verbs.AccessLocalWrite)
		require.NoError(t, err)
		qs := make([]*metaroce.QueuePair, streams)
		for s := range qs {
			qs[s], err = ca.CreateQP(metaroce.StreamID(s), verbs.QPAttr{PD: pd, SendCQ: cqa, RecvCQ: cqa})
			require.NoError(t, err)
		}
		for i, o := range ops {
			wr := verbs.SendWR{ID: uint64(i), Opcode: o.kind}
			switch o.kind {
			case verbs.WRWrite:
				wr.Local, wr.RemoteAddr, wr.RKey = mSrcA.SGE(o.off, o.size), mDstB.Addr()+uint64(guard+o.off), mDstB.RKey()
			case verbs.WRSend:
				wr.Local = mSrcA.SGE(o.off, o.size)
			case verbs.WRRead:
				wr.Local, wr.RemoteAddr, wr.RKey = mDstA.SGE(guard+o.off, o.size), mSrcB.Addr()+uint64(o.off), mSrcB.RKey()
			}
			require.NoError(t, qs[o.stream].PostSend(now, wr))
		}
	}))
	// Completions: each once, successful, in posting order per stream.
	sends := 0
	for _, o := range ops {
		if o.kind == verbs.WRSend {
			sends++
		}
	}
	check := func(side int, cq *verbs.CompletionQueue, want int) {
		last := make([]int, streams)
		for s := range last {
			last[s] = -1
		}
		got := 0
		var wcs [32]verbs.WorkCompletion
		p.await(side, fmt.Sprintf("side %d completions", side), 60*time.Second, func(verbs.Time) bool {
			n := cq.Poll(wcs[:])
			for _, wc := range wcs[:n] {
				i := int(wc.WRID)
				require.Less(t, i, len(ops))
				require.Equal(t, verbs.StatusSuccess, wc.Status, "op %d %+v", i, ops[i])
				s := ops[i].stream
				require.Greater(t, i, last[s], "stream %d: op %d completed after op %d", s, i, last[s])
				last[s] = i
			}
			got += n
			return got >= want
		})
		require.Equal(t, want, got)
	}
	check(0, cqa, len(ops))
	check(1, cqb, sends)
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, p.sh[0].Do(func(verbs.Time) { require.Zero(t, cqa.Len()) }))
	require.NoError(t, p.sh[1].Do(func(verbs.Time) { require.Zero(t, cqb.Len()) }))
	require.Equal(t, srcA[:outN], dstBAll[guard:guard+outN])
	require.Equal(t, srcB[:inN], dstAAll[guard:guard+inN])
	checkGuard(t, dstBAll[:outN+2*guard], "B")
	checkGuard(t, dstAAll[:inN+2*guard], "A")
}
