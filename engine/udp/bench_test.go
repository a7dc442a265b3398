package udp

import (
	"testing"
	"time"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// BenchmarkWriteLoopback: 64 KiB WRITEs from A to B over loopback UDP, 16
// outstanding, both backends stepped by this goroutine. ns/op is per
// message; steady state must allocate nothing (0 allocs/op).
func BenchmarkWriteLoopback(b *testing.B) {
	p := newPair(b, Config{}, Config{})
	ea, eb := metaroceEndpoints(b, p, 8)
	ca, err := ea.Connect(p.b[0].Now(), 0)
	if err != nil {
		b.Fatal(err)
	}
	var cb *mr.Conn
	p.run(b, 5*time.Second, func() bool {
		if cb == nil {
			cb, _ = eb.Accept()
		}
		return cb != nil && ca.Established()
	})
	const msg = 64 << 10
	cq, cqb := verbs.NewCompletionQueue(64), verbs.NewCompletionQueue(64)
	pd, pdb := ea.AllocPD(), eb.AllocPD()
	qa, _ := ca.CreateQP(0, verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
	if _, err := cb.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
		b.Fatal(err)
	}
	ms, _ := pd.RegisterMR(make([]byte, msg), 0)
	md, _ := pdb.RegisterMR(make([]byte, msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wr := verbs.SendWR{Opcode: verbs.WRWrite, Local: ms.SGE(0, msg), RemoteAddr: md.Addr(), RKey: md.RKey()}
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding, posted, done := 0, 0, 0
	b.SetBytes(msg)
	b.ReportAllocs()
	b.ResetTimer()
	for done < b.N {
		for outstanding < 16 && posted < b.N {
			if err := qa.PostSend(p.b[0].Now(), wr); err != nil {
				b.Fatal(err)
			}
			outstanding++
			posted++
		}
		for _, be := range p.b {
			if _, err := be.Step(0); err != nil {
				b.Fatal(err)
			}
		}
		k := cq.Poll(wcs)
		outstanding -= k
		done += k
	}
}
