package metaroce_test

import (
	"testing"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// BenchmarkPacketPath measures the whole life of one data packet with a
// 4 KiB payload between two endpoints in one goroutine: the sender builds
// it (NextPacket), the receiver checks and places it (Receive), the
// receiver's coalesced ACK is built and processed, and the slot is
// retired. One op is one data packet; steady state must not allocate.
func BenchmarkPacketPath(b *testing.B) {
	cfg := mr.Config{Paths: 8, MTU: 4096}
	a, err := mr.NewEndpoint(mr.Config{Paths: 8, MTU: 4096, Node: 1, Incarnation: 1})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Node, cfg.Incarnation, cfg.AcceptIncoming = 2, 2, true
	z, err := mr.NewEndpoint(cfg)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, a.MaxPacketLen())
	var now verbs.Time
	dataPackets := 0
	pump := func() {
		for {
			meta, ok := a.NextPacket(now, buf)
			if !ok {
				break
			}
			if buf[1] == byte(mr.OpWrite) {
				dataPackets++
			}
			z.Receive(now, buf[:meta.Len], verbs.RxMeta{Peer: 0})
		}
		for {
			meta, ok := z.NextPacket(now, buf)
			if !ok {
				break
			}
			a.Receive(now, buf[:meta.Len], verbs.RxMeta{Peer: 1})
		}
		now += 500
		for _, e := range []*mr.Endpoint{a, z} {
			if e.NextDeadline() <= now {
				e.OnTimer(now)
			}
		}
	}
	ca, err := a.Connect(now, 1)
	if err != nil {
		b.Fatal(err)
	}
	for !ca.Established() {
		pump()
	}
	cb, ok := z.Accept()
	if !ok {
		b.Fatal("no accepted connection")
	}
	pa, pz := a.AllocPD(), z.AllocPD()
	cq := verbs.NewCompletionQueue(64)
	qa, _ := ca.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq})
	if _, err := cb.CreateQP(0, verbs.QPAttr{PD: pz}); err != nil {
		b.Fatal(err)
	}
	const msg = 64 << 10
	src, _ := pa.RegisterMR(make([]byte, msg), 0)
	dst, _ := pz.RegisterMR(make([]byte, 4*msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding, id := 0, uint64(0)
	run := func(packets int) {
		target := dataPackets + packets
		for dataPackets < target {
			for outstanding < 4 {
				id++
				off := uint64(id%4) * msg
				if err := qa.PostSend(now, verbs.SendWR{ID: id, Opcode: verbs.WRWrite, Local: src.SGE(0, msg),
					RemoteAddr: dst.Addr() + off, RKey: dst.RKey()}); err != nil {
					b.Fatal(err)
				}
				outstanding++
			}
			pump()
			n := cq.Poll(wcs)
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					b.Fatal(wc.Status)
				}
			}
			outstanding -= n
		}
	}
	run(20000) // warm up: rings and pools reach their working size
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}
