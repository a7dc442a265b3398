package rocev2

import (
	"testing"

	"github.com/metaroce/metaroce/verbs"
)

// The packet-path workloads below are shared by the benchmarks (ns and
// allocations per packet) and by TestPacketPathAllocatesNothing, which
// asserts the 0 allocs/op the benchmarks report.

// writePath sets up two endpoints in one goroutine moving 64 KiB WRITEs
// of 4 KiB packets, 4 outstanding, and returns a function that runs until
// the requester has built n more data packets: each one built
// (NextPacket, ICRC included), checked and placed by the responder
// (Receive), the coalesced ACKs built and processed, work requests
// completed.
func writePath(tb testing.TB) func(n int) {
	d := newDirectPair(tb, Config{MTU: 4096, DCQCN: DCQCNConfig{Disable: true}})
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
	return func(packets int) {
		target := dataPackets + packets
		for dataPackets < target {
			for outstanding < 4 {
				id++
				off := uint64(id%4) * msg
				if err := d.qa.PostSend(d.now, verbs.SendWR{ID: id, Opcode: verbs.WRWrite, Local: src.SGE(0, msg),
					RemoteAddr: dst.Addr() + off, RKey: dst.RKey()}); err != nil {
					tb.Fatal(err)
				}
				outstanding++
			}
			d.pump()
			n := d.cqa.Poll(wcs)
			for _, wc := range wcs[:n] {
				if wc.Status != verbs.StatusSuccess {
					tb.Fatal(wc.Status)
				}
			}
			outstanding -= n
		}
	}
}

// dcqcnPath is writePath's pair with DCQCN on and every data packet
// CE-marked: CNPs, rate cuts and pacing in the loop, the clock jumping to
// the next deadline when pacing leaves the sender idle. The returned
// function runs until n more data packets were sent.
func dcqcnPath(tb testing.TB) func(n int) {
	d := newDirectPair(tb, Config{MTU: 4096})
	src, _ := d.qa.pd.RegisterMR(make([]byte, 64<<10), 0)
	dst, _ := d.qb.pd.RegisterMR(make([]byte, 64<<10), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	wcs := make([]verbs.WorkCompletion, 16)
	sent := 0
	buf := make([]byte, d.a.MaxPacketLen())
	eps := []*Endpoint{d.a, d.b}
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
		d.now = max(d.now+1, min(d.a.NextDeadline(), d.b.NextDeadline()))
		for _, e := range eps {
			if e.NextDeadline() <= d.now {
				e.OnTimer(d.now)
			}
		}
		d.cqa.Poll(wcs)
	}
	return func(n int) {
		for target := sent + n; sent < target; {
			step()
		}
	}
}

// BenchmarkPacketPath measures the whole life of one 4 KiB WRITE packet
// (writePath). One op is one data packet.
func BenchmarkPacketPath(b *testing.B) {
	run := writePath(b)
	run(20000) // warm up: rings and pools reach their working size
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}

// BenchmarkPacketPathDCQCN is BenchmarkPacketPath with DCQCN on and every
// data packet CE-marked (dcqcnPath). One op is one data packet.
func BenchmarkPacketPathDCQCN(b *testing.B) {
	run := dcqcnPath(b)
	run(20000)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}

// icrcPacket is a 4 KiB WRITE Middle packet and its flow, for sealing.
func icrcPacket() ([]byte, Flow) {
	pkt := make([]byte, BTHLen+4096+ICRCLen)
	(&BTH{Opcode: OpWriteMiddle, DestQP: 5}).Put(pkt)
	return pkt, Flow{SrcIP: IPv4{10, 0, 0, 1}, DstIP: IPv4{10, 0, 0, 2}, SrcPort: 0xC123}
}

func BenchmarkICRC4K(b *testing.B) {
	pkt, f := icrcPacket()
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
