package metaroce

import "testing"

// BenchmarkScoreboardInOrder: one in-order arrival (classify + mark).
func BenchmarkScoreboardInOrder(b *testing.B) {
	var s rxScoreboard
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		psn := s.cum
		if s.classify(psn) != psnNew {
			b.Fatal("not new")
		}
		s.mark(psn)
	}
}

// BenchmarkScoreboardWithGaps: arrivals with one loss in every 16, each
// repaired 16 PSNs later, so the cumulative point jumps over runs.
func BenchmarkScoreboardWithGaps(b *testing.B) {
	var s rxScoreboard
	next := PSN(0)
	var holes [64]PSN
	nh := 0
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var psn PSN
		if i%16 == 15 && nh > 0 {
			psn = holes[0]
			copy(holes[:], holes[1:nh])
			nh--
		} else {
			psn = next
			next++
			if i%16 == 7 && nh < len(holes) {
				holes[nh] = psn
				nh++
				continue
			}
		}
		if s.classify(psn) == psnNew {
			s.mark(psn)
		}
	}
}

// BenchmarkAckBlockRoundTrip: encode and decode one ACK block.
func BenchmarkAckBlockRoundTrip(b *testing.B) {
	var buf [AckBlockLen]byte
	a := AckBlock{Path: 3, Cum: 1000, Sack: SackBitmap{0xf0f0, 1, 0, 1 << 63}, ECNCount: 9, TSEcho: 12345}
	var d AckBlock
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.Cum++
		a.Put(buf[:])
		if _, err := d.Decode(buf[:]); err != nil {
			b.Fatal(err)
		}
	}
}
