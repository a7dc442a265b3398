package rocev2

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// BenchmarkPacketPath measures the whole life of one 4 KiB WRITE packet
// between two endpoints in one goroutine: the requester builds it
// (NextPacket, ICRC included), the responder checks and places it
// (Receive), the coalesced ACK is built and processed and work requests
// complete. One op is one data packet; steady state must not allocate.
func BenchmarkPacketPath(b *testing.B) {
	d := newDirectPair(b, Config{MTU: 4096, DCQCN: DCQCNConfig{Disable: true}})
	dataPackets := 0
	d.tap = func(from int, pkt []byte) {
		if from == 0 && Opcode(pkt[0]).IsWrite() {
			dataPackets++
		}
	}
	const msg = 64 << 10
	src, _ := d.qa.pd.RegisterMR(make([]byte, msg), 0)
	dst, _ := d.qb.pd.RegisterMR(make([]byte, 4*msg), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wcs := make([]verbs.WorkCompletion, 16)
	outstanding, id := 0, uint64(0)
	run := func(packets int) {
		target := dataPackets + packets
		for dataPackets < target {
			for outstanding < 4 {
				id++
				off := uint64(id%4) * msg
				if err := d.qa.PostSend(d.now, verbs.SendWR{ID: id, Opcode: verbs.WRWrite, Local: src.SGE(0, msg),
					RemoteAddr: dst.Addr() + off, RKey: dst.RKey()}); err != nil {
					b.Fatal(err)
				}
				outstanding++
			}
			d.pump()
			n := d.cqa.Poll(wcs)
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

// BenchmarkPacketPathDCQCN is BenchmarkPacketPath with DCQCN on and every
// data packet CE-marked: CNPs, cuts and pacing in the loop. One op is one
// data packet.
func BenchmarkPacketPathDCQCN(b *testing.B) {
	d := newDirectPair(b, Config{MTU: 4096})
	src, _ := d.qa.pd.RegisterMR(make([]byte, 64<<10), 0)
	dst, _ := d.qb.pd.RegisterMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wcs := make([]verbs.WorkCompletion, 16)
	sent := 0
	buf := make([]byte, d.a.MaxPacketLen())
	step := func() {
		if d.qa.OutstandingSends() < 2 {
			_ = d.qa.PostSend(d.now, verbs.SendWR{Opcode: verbs.WRWrite, Local: src.SGE(0, 64<<10), RemoteAddr: dst.Addr(), RKey: dst.RKey()})
		}
		for {
			m, ok := d.a.NextPacket(d.now, buf)
			if !ok {
				break
			}
			sent++
			d.b.Receive(d.now, buf[:m.Len], verbs.RxMeta{Peer: 0, CE: true})
		}
		for {
			m, ok := d.b.NextPacket(d.now, buf)
			if !ok {
				break
			}
			d.a.Receive(d.now, buf[:m.Len], verbs.RxMeta{Peer: 1})
		}
		// Jump to the next event: DCQCN pacing leaves the sender idle.
		d.now = max(d.now+1, min(d.a.NextDeadline(), d.b.NextDeadline()))
		for _, e := range []*Endpoint{d.a, d.b} {
			if e.NextDeadline() <= d.now {
				e.OnTimer(d.now)
			}
		}
		d.cqa.Poll(wcs)
	}
	for sent < 20000 {
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	target := sent + b.N
	for sent < target {
		step()
	}
}

func BenchmarkICRC4K(b *testing.B) {
	pkt := make([]byte, BTHLen+4096+ICRCLen)
	(&BTH{Opcode: OpWriteMiddle, DestQP: 5}).Put(pkt)
	f := Flow{SrcIP: IPv4{10, 0, 0, 1}, DstIP: IPv4{10, 0, 0, 2}, SrcPort: 0xC123}
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		SealICRC(pkt, len(pkt)-ICRCLen, f)
	}
}

func BenchmarkPacketDecode(b *testing.B) {
	pkts := capturedPackets(b)
	b.ReportAllocs()
	b.ResetTimer()
	var p Packet
	for i := 0; i < b.N; i++ {
		_ = p.Decode(pkts[i%len(pkts)])
	}
}
