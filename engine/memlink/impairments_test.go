package memlink

import (
	"math"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// sendN sends n numbered 64-byte packets from side A, one every 10 ns, on
// the path keyOf(i), and returns the delivered sequence numbers in order.
func sendN(t *testing.T, l *Link, n int, keyOf func(i int) PathKey) []uint64 {
	t.Helper()
	for i := range n {
		l.Send(int64(i*10), A, numbered(uint64(i), 64), keyOf(i))
	}
	var seqs []uint64
	for _, d := range drain(t, l) {
		seqs = append(seqs, seqOf(d.data))
	}
	return seqs
}

func onePath(int) PathKey { return PathKey{Entropy: 1} }

// within asserts |got-want| <= tol.
func within(t *testing.T, want, tol, got float64, what string) {
	t.Helper()
	require.InDelta(t, want, got, tol, "%s: got %.5f, want %.5f ± %.5f", what, got, want, tol)
}

func TestRandomLossRate(t *testing.T) {
	const n = 100_000
	for _, p := range []float64{0.01, 0.1, 0.5} {
		l := New(Config{Seed: 11, Loss: p})
		got := sendN(t, l, n, onePath)
		s := l.Stats()
		rate := float64(s.DroppedRandom) / n
		// 5 standard deviations of a binomial proportion.
		within(t, p, 5*math.Sqrt(p*(1-p)/n), rate, "loss rate")
		require.Equal(t, uint64(n)-s.DroppedRandom, uint64(len(got)))
		require.Equal(t, s.Dropped(), s.DroppedRandom, "no other cause may drop")
	}
}

func TestPathLossOnlyOnThatEntropy(t *testing.T) {
	const n = 100_000
	l := New(Config{Seed: 12, PathLoss: map[uint16]float64{7: 0.3}})
	keyOf := func(i int) PathKey { return PathKey{Entropy: uint16(i % 16), Plane: uint8(i % 3)} }
	got := sendN(t, l, n, keyOf)
	perEntropy := make([]int, 16)
	for _, s := range got {
		perEntropy[s%16]++
	}
	for e, c := range perEntropy {
		if e == 7 {
			rate := 1 - float64(c)/(n/16)
			within(t, 0.3, 5*math.Sqrt(0.3*0.7/(n/16)), rate, "entropy 7 loss")
			continue
		}
		require.Equal(t, n/16, c, "entropy %d lost packets", e)
	}
	s := l.Stats()
	require.Equal(t, uint64(n/16-perEntropy[7]), s.DroppedPath)
	require.Equal(t, s.Dropped(), s.DroppedPath)
}

func TestGilbertElliottBurstLength(t *testing.T) {
	const n = 200_000
	ge := GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.25, LossGood: 0, LossBad: 1}
	l := New(Config{Seed: 13, Bursty: &ge})
	got := sendN(t, l, n, onePath)

	// Walk the delivered sequence numbers; each gap is one burst.
	var bursts, lost int
	next := uint64(0)
	for _, s := range append(got, n) {
		if s > next {
			bursts++
			lost += int(s - next)
		}
		next = s + 1
	}
	mean := float64(lost) / float64(bursts)
	within(t, 1/ge.PBadToGood, 0.1/ge.PBadToGood, mean, "mean burst length")
	stationary := ge.PGoodToBad / (ge.PGoodToBad + ge.PBadToGood)
	within(t, stationary, 0.15*stationary, float64(lost)/n, "long-run loss rate")
	require.Equal(t, uint64(lost), l.Stats().DroppedBurst)

	// Independent random loss at the same rate has bursts near 1 long:
	// the GE model is what makes them long.
	l = New(Config{Seed: 13, Loss: stationary})
	got = sendN(t, l, n, onePath)
	bursts, lost, next = 0, 0, 0
	for _, s := range append(got, n) {
		if s > next {
			bursts++
			lost += int(s - next)
		}
		next = s + 1
	}
	require.Less(t, float64(lost)/float64(bursts), 1.1)
}

func TestGilbertElliottStatePerDirection(t *testing.T) {
	// The state flips before every packet (good->bad->good...) and only the
	// bad state loses, so each direction drops its 1st, 3rd, 5th... packet.
	// A state shared by both directions would drop every A packet and no
	// B packet instead.
	l := New(Config{Seed: 1, Bursty: &GilbertElliott{PGoodToBad: 1, PBadToGood: 1, LossBad: 1}})
	for i := range 8 {
		l.Send(int64(i), Side(i%2), numbered(uint64(i), 8), PathKey{})
	}
	var seqs []uint64
	for _, d := range drain(t, l) {
		seqs = append(seqs, seqOf(d.data))
	}
	require.Equal(t, []uint64{2, 3, 6, 7}, seqs)
}

func TestBlackout(t *testing.T) {
	dead := PathKey{Entropy: 5, Plane: 1}
	sameEntropyOtherPlane := PathKey{Entropy: 5, Plane: 0}
	other := PathKey{Entropy: 6, Plane: 1}
	keys := []PathKey{dead, sameEntropyOtherPlane, other}

	for _, anyPlane := range []bool{false, true} {
		l := New(Config{Seed: 1, Delay: 50, Blackouts: []Blackout{{Entropy: 5, Plane: 1, AnyPlane: anyPlane, At: 1000}}})
		type sent struct {
			at   int64
			from Side
			k    PathKey
		}
		var all []sent
		for now := int64(0); now < 2000; now += 10 {
			for _, k := range keys {
				for _, from := range []Side{A, B} {
					l.Send(now, from, numbered(uint64(len(all)), 8), k)
					all = append(all, sent{now, from, k})
				}
			}
		}
		delivered := map[uint64]bool{}
		for _, d := range drain(t, l) {
			delivered[seqOf(d.data)] = true
		}
		var blackedOut uint64
		for i, s := range all {
			killed := s.at >= 1000 && (s.k == dead || (anyPlane && s.k == sameEntropyOtherPlane))
			require.Equal(t, !killed, delivered[uint64(i)], "anyPlane=%v packet %d %+v", anyPlane, i, s)
			if killed {
				blackedOut++
			}
		}
		require.Equal(t, blackedOut, l.Stats().DroppedBlackout)
		require.Equal(t, blackedOut, l.Stats().Dropped())
	}
}

func TestReorderOvertakes(t *testing.T) {
	const n = 20_000
	l := New(Config{Seed: 14, Delay: 100, Reorder: 0.1, ReorderDelay: 1000})
	got := sendN(t, l, n, onePath)
	require.Len(t, got, n, "reordering must not lose packets")

	inversions := 0
	seen := make([]bool, n)
	for i, s := range got {
		require.False(t, seen[s], "packet %d delivered twice", s)
		seen[s] = true
		if i > 0 && s < got[i-1] {
			inversions++
		}
	}
	require.Positive(t, inversions, "nothing was reordered")
	r := l.Stats().Reordered
	within(t, 0.1, 5*math.Sqrt(0.1*0.9/n), float64(r)/n, "reorder rate")
	// Each held packet is overtaken by the ~100 sent in the next 1000 ns.
	require.LessOrEqual(t, uint64(inversions), r)
}

func TestDuplicate(t *testing.T) {
	l := New(Config{Seed: 15, Delay: 10, Duplicate: 1})
	got := sendN(t, l, 100, onePath)
	require.Len(t, got, 200)
	for i := range 100 {
		require.Equal(t, uint64(i), got[2*i])
		require.Equal(t, uint64(i), got[2*i+1], "the copy arrives right after the original")
	}
	require.Equal(t, Stats{Sent: 100, Delivered: 200, Duplicated: 100}, l.Stats())

	const n = 100_000
	l = New(Config{Seed: 15, Duplicate: 0.2})
	got = sendN(t, l, n, onePath)
	d := l.Stats().Duplicated
	within(t, 0.2, 5*math.Sqrt(0.2*0.8/n), float64(d)/n, "duplicate rate")
	require.Equal(t, n+int(d), len(got))
}

func TestCorruptFlipsExactlyOneBit(t *testing.T) {
	for _, p := range []float64{1, 0.3} {
		const n = 20_000
		l := New(Config{Seed: 16, Corrupt: p})
		want := make([][]byte, n)
		for i := range n {
			want[i] = numbered(uint64(i), 8+i%200)
			l.Send(int64(i), A, want[i], PathKey{})
		}
		corrupted := 0
		for i, d := range drain(t, l) {
			flipped := 0
			for j := range want[i] {
				flipped += bits.OnesCount8(want[i][j] ^ d.data[j])
			}
			switch flipped {
			case 0:
			case 1:
				corrupted++
			default:
				t.Fatalf("packet %d: %d bits flipped, want 0 or 1", i, flipped)
			}
		}
		require.Equal(t, uint64(corrupted), l.Stats().Corrupted)
		if p == 1 {
			require.Equal(t, n, corrupted)
		} else {
			within(t, p, 5*math.Sqrt(p*(1-p)/n), float64(corrupted)/n, "corrupt rate")
		}
	}
}

func TestCorruptSkipsEmptyPackets(t *testing.T) {
	l := New(Config{Seed: 1, Corrupt: 1})
	l.Send(0, A, nil, PathKey{})
	got := drain(t, l)
	require.Len(t, got, 1)
	require.Empty(t, got[0].data)
	require.Zero(t, l.Stats().Corrupted)
}

func TestProbabilityZeroAndOneDrawNothing(t *testing.T) {
	// Impairments that are off or certain consume no random numbers, so
	// turning one on at probability 1 leaves the other draws unchanged.
	trace := func(cfg Config) []uint64 {
		cfg.Seed, cfg.Loss = 17, 0.5
		return sendN(t, New(cfg), 1000, onePath)
	}
	base := trace(Config{})
	require.Equal(t, base, trace(Config{Reorder: 1, ReorderDelay: 0}))
	require.Equal(t, base, trace(Config{PathLoss: map[uint16]float64{1: 0}}))
}

func TestBlackoutComesBack(t *testing.T) {
	l := New(Config{Seed: 1, Delay: 50, Blackouts: []Blackout{{Entropy: 5, AnyPlane: true, At: 1000, Until: 1500}}})
	k := PathKey{Entropy: 5}
	for now := int64(0); now < 2000; now += 10 {
		l.Send(now, Side(now/10%2), numbered(uint64(now), 8), k)
	}
	got := map[uint64]bool{}
	for _, d := range drain(t, l) {
		got[seqOf(d.data)] = true
	}
	for now := int64(0); now < 2000; now += 10 {
		down := now >= 1000 && now < 1500
		require.Equal(t, !down, got[uint64(now)], "packet sent at %d", now)
	}
	require.Equal(t, uint64(50), l.Stats().DroppedBlackout)
}

func TestHoldDelaysOnlyItsPathAndWindow(t *testing.T) {
	held := PathKey{Entropy: 5, Plane: 1}
	otherPlane := PathKey{Entropy: 5, Plane: 0}
	other := PathKey{Entropy: 6, Plane: 1}
	for _, anyPlane := range []bool{false, true} {
		l := New(Config{Seed: 1, Delay: 50})
		l.AddHold(Hold{Entropy: 5, Plane: 1, AnyPlane: anyPlane, At: 1000, Until: 1200, Extra: 7000})
		type sent struct {
			at int64
			k  PathKey
		}
		var all []sent
		for now := int64(0); now < 2000; now += 10 {
			for _, k := range []PathKey{held, otherPlane, other} {
				l.Send(now, Side(len(all)%2), numbered(uint64(len(all)), 8), k)
				all = append(all, sent{now, k})
			}
		}
		var n uint64
		for _, d := range drain(t, l) {
			s := all[seqOf(d.data)]
			want := s.at + 50
			if s.at >= 1000 && s.at < 1200 && (s.k == held || (anyPlane && s.k == otherPlane)) {
				want += 7000
				n++
			}
			require.Equal(t, want, d.at, "anyPlane=%v %+v", anyPlane, s)
		}
		require.Equal(t, n, l.Stats().Held)
		require.Equal(t, uint64(len(all)), l.Stats().Delivered, "a hold loses nothing")
	}
	require.Panics(t, func() { New(Config{}).AddHold(Hold{Extra: -1}) })
	require.Panics(t, func() { New(Config{Holds: []Hold{{Extra: -1}}}) })
}

func TestJitterSpreadsAndReordersOnePath(t *testing.T) {
	const n = 20_000
	l := New(Config{Seed: 16, Delay: 100, Jitter: 400})
	for i := range n {
		l.Send(int64(i*10), A, numbered(uint64(i), 64), onePath(i))
	}
	inversions := 0
	var last uint64
	var lo, hi int64 = 1 << 62, 0
	for i, d := range drain(t, l) {
		s := seqOf(d.data)
		extra := d.at - int64(s*10) - 100
		require.GreaterOrEqual(t, extra, int64(0))
		require.LessOrEqual(t, extra, int64(400))
		lo, hi = min(lo, extra), max(hi, extra)
		if i > 0 && s < last {
			inversions++
		}
		last = s
	}
	require.Positive(t, inversions, "jitter reorders packets of one path")
	require.Less(t, lo, int64(10))
	require.Greater(t, hi, int64(390), "the extra delay spans [0, Jitter]")
	require.Panics(t, func() { New(Config{Jitter: -1}) })
}
