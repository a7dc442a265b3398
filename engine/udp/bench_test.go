package udp

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// writeLoopback connects two metaroce endpoints (8 paths) over loopback
// UDP and returns a function that keeps 16 WRITEs of 64 KiB outstanding
// from A to B, both backends stepped by this goroutine, until n more
// have completed. Shared by BenchmarkWriteLoopback (ns per message) and
// TestWriteLoopbackAllocatesNothing (0 allocations per message), which
// also reads the pair's send sockets.
func writeLoopback(tb testing.TB) (func(n int), *pair) {
	p := newPair(tb, Config{}, Config{})
	ea, eb := metaroceEndpoints(tb, p, 8)
	ca, cb := connectMetaroce(tb, p, ea, eb)
	const msg = 64 << 10
	cq, cqb := verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	pd, pdb := ea.AllocPD(), eb.AllocPD()
	qa, _ := ca.CreateQP(0, verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
	if _, err := cb.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
		tb.Fatal(err)
	}
	ms, _ := pd.RegisterMR(make([]byte, msg), 0)
	md, _ := pdb.RegisterMR(make([]byte, msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wr := verbs.SendWR{Opcode: verbs.WRWrite, Local: ms.SGE(0, msg), RemoteAddr: md.Addr(), RKey: md.RKey()}
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding := 0
	return func(n int) {
		for done := 0; done < n; {
			for outstanding < 16 {
				if err := qa.PostSend(p.b[0].Now(), wr); err != nil {
					tb.Fatal(err)
				}
				outstanding++
			}
			for _, be := range p.b {
				if _, err := be.Step(0); err != nil {
					tb.Fatal(err)
				}
			}
			k := cq.Poll(wcs)
			for _, wc := range wcs[:k] {
				if wc.Status != verbs.StatusSuccess {
					tb.Fatal(wc.Status)
				}
			}
			outstanding -= k
			done += k
		}
	}, p
}

// BenchmarkWriteLoopback: 64 KiB WRITEs from A to B over loopback UDP
// (writeLoopback). ns/op is per message.
func BenchmarkWriteLoopback(b *testing.B) {
	run, _ := writeLoopback(b)
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}
