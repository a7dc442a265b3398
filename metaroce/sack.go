package metaroce

import "math/bits"

// rxScoreboard is a receiver's record of one path's sequence space: the
// cumulative point (next PSN expected) and which of the 256 PSNs above it
// have arrived. It is the state an ACK block reports.
type rxScoreboard struct {
	cum  PSN
	sack SackBitmap
}

// Classification of an arriving PSN against the scoreboard.
type psnClass uint8

const (
	psnNew       psnClass = iota // not seen yet, inside the window
	psnDuplicate                 // already received (below cum or bit set)
	psnBeyond                    // more than SackBits above cum: cannot be tracked
)

// classify says whether psn is new, a duplicate or beyond the window.
func (s *rxScoreboard) classify(psn PSN) psnClass {
	d := s.cum.Distance(psn)
	switch {
	case d < 0:
		return psnDuplicate
	case d == 0:
		return psnNew
	case d > SackBits:
		return psnBeyond
	}
	i := uint(d - 1)
	if s.sack[i/64]&(1<<(i%64)) != 0 {
		return psnDuplicate
	}
	return psnNew
}

// mark records psn, which classify reported as psnNew, and advances the
// cumulative point over every consecutive PSN now received.
func (s *rxScoreboard) mark(psn PSN) {
	d := s.cum.Distance(psn)
	if d > 0 {
		i := uint(d - 1)
		s.sack[i/64] |= 1 << (i % 64)
		return
	}
	// In-order arrival: cum moves past psn and past the run of received
	// PSNs that follows it.
	run := uint(0)
	for w := 0; w < sackWords; w++ {
		t := uint(bits.TrailingZeros64(^s.sack[w]))
		run += t
		if t < 64 {
			break
		}
	}
	s.cum += PSN(run + 1)
	s.sack.shiftDown(run + 1)
}

// reset starts a new sequence space at PSN 0.
func (s *rxScoreboard) reset() { *s = rxScoreboard{} }

// shiftDown moves every bit n places toward bit 0 (bit i becomes bit i-n),
// filling with zeros.
func (b *SackBitmap) shiftDown(n uint) {
	if n >= SackBits {
		*b = SackBitmap{}
		return
	}
	words, sh := int(n/64), n%64
	for i := 0; i < sackWords; i++ {
		var v uint64
		if j := i + words; j < sackWords {
			v = b[j] >> sh
			if sh != 0 && j+1 < sackWords {
				v |= b[j+1] << (64 - sh)
			}
		}
		b[i] = v
	}
}

// Has reports whether bit i (PSN cum+1+i) is set.
func (b *SackBitmap) Has(i int) bool { return b[i/64]&(1<<(uint(i)%64)) != 0 }

// Highest returns the index of the highest set bit, or -1 when none is set.
func (b *SackBitmap) Highest() int {
	for w := sackWords - 1; w >= 0; w-- {
		if b[w] != 0 {
			return w*64 + 63 - bits.LeadingZeros64(b[w])
		}
	}
	return -1
}
