package memlink

import (
	"encoding/binary"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// delivery is one entry of a delivery trace.
type delivery struct {
	at   int64
	to   Side
	key  PathKey
	data string
}

// drain runs the link's virtual clock forward, from one due packet to the
// next, until nothing is in flight, and returns every delivery in order.
func drain(t testing.TB, l *Link) []delivery {
	t.Helper()
	var out []delivery
	for {
		at, ok := l.NextDelivery()
		if !ok {
			return out
		}
		n := l.Deliver(at, func(to Side, pkt []byte, k PathKey) {
			out = append(out, delivery{at: at, to: to, key: k, data: string(pkt)})
		})
		if n == 0 { // plain check: require's reflection is slow in this hot loop
			t.Fatalf("NextDelivery said %d was due but Deliver delivered nothing", at)
		}
	}
}

// numbered returns an n-byte packet (n >= 8) carrying seq in its first 8
// bytes and a pattern after it.
func numbered(seq uint64, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, seq)
	for i := 8; i < n; i++ {
		b[i] = byte(i)
	}
	return b
}

func seqOf(data string) uint64 { return binary.BigEndian.Uint64([]byte(data[:8])) }

func TestZeroConfigIsLosslessWithExactDelay(t *testing.T) {
	l := New(Config{Seed: 1, Delay: 500})
	k := PathKey{Entropy: 49152, Plane: 0}
	for i := range 100 {
		l.Send(int64(i*10), Side(i%2), numbered(uint64(i), 64), k)
	}
	got := drain(t, l)
	require.Len(t, got, 100)
	for i, d := range got {
		require.Equal(t, int64(i*10+500), d.at)
		require.Equal(t, Side(i%2).Other(), d.to)
		require.Equal(t, k, d.key)
		require.Equal(t, uint64(i), seqOf(d.data))
	}
	require.Equal(t, Stats{Sent: 100, Delivered: 100}, l.Stats())
}

func TestSideOther(t *testing.T) {
	require.Equal(t, B, A.Other())
	require.Equal(t, A, B.Other())
	require.Equal(t, "A", A.String())
	require.Equal(t, "B", B.String())
}

func TestNextDeliveryAndDeliverRespectNow(t *testing.T) {
	l := New(Config{Seed: 1, Delay: 100})
	_, ok := l.NextDelivery()
	require.False(t, ok)
	l.Send(0, A, []byte("x"), PathKey{})
	l.Send(50, A, []byte("y"), PathKey{})
	at, ok := l.NextDelivery()
	require.True(t, ok)
	require.Equal(t, int64(100), at)
	require.Equal(t, 0, l.Deliver(99, func(Side, []byte, PathKey) { t.Fatal("delivered early") }))
	require.Equal(t, 1, l.Deliver(149, func(to Side, pkt []byte, _ PathKey) { require.Equal(t, "x", string(pkt)) }))
	require.Equal(t, 1, l.InFlight())
	require.Equal(t, 1, l.Deliver(1000, func(to Side, pkt []byte, _ PathKey) { require.Equal(t, "y", string(pkt)) }))
	require.Equal(t, 0, l.InFlight())
}

func TestTiesDeliverInSendOrder(t *testing.T) {
	l := New(Config{Seed: 1, Delay: 10})
	for i := range 50 {
		// Different paths, same time: only the send order may decide.
		l.Send(0, Side(i%2), numbered(uint64(i), 8), PathKey{Entropy: uint16(1000 - i)})
	}
	for i, d := range drain(t, l) {
		require.Equal(t, uint64(i), seqOf(d.data))
	}
}

func TestSendCopiesCallerBuffer(t *testing.T) {
	l := New(Config{Seed: 1, Delay: 1, Corrupt: 1, Duplicate: 1})
	buf := []byte("hello, memlink")
	l.Send(0, A, buf, PathKey{})
	require.Equal(t, "hello, memlink", string(buf), "corruption must never touch the caller's buffer")
	copy(buf, "XXXXX") // the caller reuses its buffer at once
	for _, d := range drain(t, l) {
		require.Len(t, d.data, len(buf))
		require.NotContains(t, d.data, "XXXXX")
	}
}

// The link is deterministic: the same seed and call sequence give the same
// trace, and another seed gives another.
func TestDeterministicForSeed(t *testing.T) {
	run := func(seed int64) []delivery {
		l := New(Config{
			Seed:         seed,
			Delay:        2000,
			RateBps:      25e9,
			PathDelay:    func(k PathKey) int64 { return int64(k.Entropy%4) * 300 },
			Loss:         0.02,
			PathLoss:     map[uint16]float64{3: 0.2},
			Bursty:       &GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.3, LossBad: 0.9},
			Reorder:      0.05,
			ReorderDelay: 5000,
			Duplicate:    0.02,
			Corrupt:      0.02,
			Blackouts:    []Blackout{{Entropy: 5, AnyPlane: true, At: 500_000}},
		})
		var out []delivery
		now := int64(0)
		for i := range 5000 {
			now += 173
			l.Send(now, Side(i%2), numbered(uint64(i), 64+i%900), PathKey{Entropy: uint16(i % 8), Plane: uint8(i % 2)})
			l.Deliver(now, func(to Side, pkt []byte, k PathKey) {
				out = append(out, delivery{at: now, to: to, key: k, data: string(pkt)})
			})
		}
		return append(out, drain(t, l)...)
	}
	a, b := run(42), run(42)
	require.Equal(t, a, b)
	require.NotEqual(t, a, run(43))
}

func TestFIFOPerPathWithoutReorder(t *testing.T) {
	l := New(Config{
		Seed:      7,
		Delay:     1000,
		RateBps:   10e9,
		PathDelay: func(k PathKey) int64 { return int64(k.Entropy) * 777 },
		Loss:      0.1,
		Duplicate: 0.1,
	})
	for i := range 20000 {
		l.Send(int64(i*37), Side(i%2), numbered(uint64(i), 64+i%1400), PathKey{Entropy: uint16(i % 5), Plane: uint8(i % 3)})
	}
	last := map[struct {
		to Side
		k  PathKey
	}]uint64{}
	for _, d := range drain(t, l) {
		id := struct {
			to Side
			k  PathKey
		}{d.to, d.key}
		s := seqOf(d.data)
		if prev, ok := last[id]; ok {
			require.GreaterOrEqual(t, s, prev, "path %+v to %v delivered %d after %d", d.key, d.to, s, prev)
		}
		last[id] = s
	}
}

func TestRateSpacesDeliveries(t *testing.T) {
	const (
		rate  = 8e9 // 1 byte per ns
		delay = 5000
		size  = 1000 // so one packet takes 1000 ns to serialize
	)
	l := New(Config{Seed: 1, Delay: delay, RateBps: rate})
	for i := range 10 {
		l.Send(0, A, numbered(uint64(i), size), PathKey{Entropy: uint16(i)})
	}
	// The other direction has its own serializer.
	l.Send(0, B, numbered(100, size), PathKey{})
	got := drain(t, l)
	require.Len(t, got, 11)
	var atB []int64
	for _, d := range got {
		if d.to == B {
			atB = append(atB, d.at)
		} else {
			require.Equal(t, int64(delay+size), d.at)
		}
	}
	for i, at := range atB {
		require.Equal(t, int64(delay+(i+1)*size), at, "packet %d", i)
	}

	// After the queue drains, a packet starts serializing when sent.
	l.Send(1_000_000, A, numbered(0, 500), PathKey{})
	at, ok := l.NextDelivery()
	require.True(t, ok)
	require.Equal(t, int64(1_000_000+500+delay), at)

	// A packet sent while the serializer is busy waits for it.
	l2 := New(Config{Seed: 1, RateBps: rate})
	l2.Send(0, A, make([]byte, 1000), PathKey{})
	l2.Send(300, A, make([]byte, 100), PathKey{})
	got = drain(t, l2)
	require.Equal(t, int64(1000), got[0].at)
	require.Equal(t, int64(1100), got[1].at)
}

func TestRateFractionalNanoseconds(t *testing.T) {
	// 64 B at 100 Gb/s is 5.12 ns: the serializer keeps the fraction so
	// the long-run rate is exact, and deliveries round up to whole ns.
	l := New(Config{Seed: 1, RateBps: 100e9})
	for range 1000 {
		l.Send(0, A, make([]byte, 64), PathKey{})
	}
	got := drain(t, l)
	require.Equal(t, int64(5120), got[len(got)-1].at)
	for i := 1; i < len(got); i++ {
		gap := got[i].at - got[i-1].at
		require.True(t, gap == 5 || gap == 6, "gap %d", gap)
	}
}

func TestSendFromDeliverCallback(t *testing.T) {
	// An endpoint answering from its receive handler: ping-pong 10 times.
	l := New(Config{Seed: 1, Delay: 100})
	l.Send(0, A, []byte{0}, PathKey{})
	var trace []int64
	for {
		at, ok := l.NextDelivery()
		if !ok {
			break
		}
		l.Deliver(at, func(to Side, pkt []byte, k PathKey) {
			trace = append(trace, at)
			if pkt[0] < 9 {
				l.Send(at, to, []byte{pkt[0] + 1}, k)
			}
		})
	}
	require.Equal(t, []int64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}, trace)
}

func TestDeliverIsNotReentrant(t *testing.T) {
	l := New(Config{Seed: 1})
	l.Send(0, A, []byte{1}, PathKey{})
	require.Panics(t, func() {
		l.Deliver(0, func(Side, []byte, PathKey) { l.Deliver(0, func(Side, []byte, PathKey) {}) })
	})
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"loss>1":        {Loss: 1.5},
		"negative":      {Duplicate: -0.1},
		"pathloss":      {PathLoss: map[uint16]float64{1: 2}},
		"bursty":        {Bursty: &GilbertElliott{PBadToGood: -1}},
		"delay":         {Delay: -1},
		"reorder delay": {ReorderDelay: -1},
		"rate":          {RateBps: -1},
	} {
		require.Panics(t, func() { New(c) }, name)
	}
}

func TestConfigIsCopied(t *testing.T) {
	pl := map[uint16]float64{1: 1}
	bo := []Blackout{{Entropy: 2, At: 0}}
	ge := &GilbertElliott{}
	l := New(Config{Seed: 1, PathLoss: pl, Blackouts: bo, Bursty: ge})
	pl[1] = 0
	bo[0].Entropy = 3
	ge.LossGood = 1
	l.Send(0, A, []byte{1}, PathKey{Entropy: 1})
	l.Send(0, A, []byte{2}, PathKey{Entropy: 2})
	l.Send(0, A, []byte{3}, PathKey{Entropy: 3})
	got := drain(t, l)
	require.Len(t, got, 1)
	require.Equal(t, PathKey{Entropy: 3}, got[0].key)
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	l := New(Config{
		Seed: 1, Delay: 1000, RateBps: 100e9, Loss: 0.01, PathLoss: map[uint16]float64{3: 0.1},
		Bursty:  &GilbertElliott{PGoodToBad: 0.01, PBadToGood: 0.5, LossBad: 1},
		Reorder: 0.01, ReorderDelay: 3000, Duplicate: 0.01, Corrupt: 0.01,
		Blackouts: []Blackout{{Entropy: 7, At: 0}},
	})
	pkt := make([]byte, 1024)
	now := int64(0)
	var delivered int
	fn := func(Side, []byte, PathKey) { delivered++ }
	step := func() {
		now += 100
		l.Send(now, Side(now/100%2), pkt, PathKey{Entropy: uint16(now / 100 % 8)})
		l.Deliver(now, fn)
	}
	for range 10000 { // warm up: grow the heap and the free list
		step()
	}
	require.Zero(t, testing.AllocsPerRun(10000, step))
	require.Positive(t, delivered)
}

func BenchmarkSendDeliver(b *testing.B) {
	benchLink(b, Config{Seed: 1, Delay: 2000, RateBps: 100e9})
}

func BenchmarkSendDeliverImpaired(b *testing.B) {
	benchLink(b, Config{
		Seed: 1, Delay: 2000, RateBps: 100e9,
		PathDelay: func(k PathKey) int64 { return int64(k.Entropy) * 10 },
		Loss:      0.01, PathLoss: map[uint16]float64{3: 0.05},
		Bursty:  &GilbertElliott{PGoodToBad: 0.001, PBadToGood: 0.2, LossBad: 1},
		Reorder: 0.01, ReorderDelay: 5000, Duplicate: 0.01, Corrupt: 0.01,
		Blackouts: []Blackout{{Entropy: 7, At: 0}},
	})
}

// benchLink measures one Send plus the Deliver that follows, in steady
// state: 1 KiB packets every 100 ns on 8 paths in both directions, with
// about 20 packets in flight.
func benchLink(b *testing.B, cfg Config) {
	l := New(cfg)
	pkt := make([]byte, 1024)
	now := int64(0)
	var n int
	fn := func(_ Side, p []byte, _ PathKey) { n += len(p) }
	step := func(i int) {
		now += 100
		l.Send(now, Side(i%2), pkt, PathKey{Entropy: uint16(i % 8)})
		l.Deliver(now, fn)
	}
	for i := range 10000 {
		step(i)
	}
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		step(i)
	}
}

// FuzzLink drives a link with fuzzer-chosen impairments and traffic and
// checks the invariants that hold whatever the configuration: deliveries
// never go back in time, every delivered copy is a sent packet with at most
// one bit flipped, and the stats add up.
func FuzzLink(f *testing.F) {
	f.Add(int64(1), uint8(10), uint8(5), uint8(5), uint8(5), uint8(5), uint16(0), []byte{1, 2, 3, 200, 17, 0, 99})
	f.Add(int64(-7), uint8(255), uint8(0), uint8(255), uint8(255), uint8(0), uint16(1000), []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seed int64, loss, reorder, dup, corrupt, burst uint8, rateMbps uint16, ops []byte) {
		p := func(b uint8) float64 { return float64(b) / 255 }
		l := New(Config{
			Seed: seed, Delay: 1000, RateBps: float64(rateMbps) * 1e6,
			PathDelay: func(k PathKey) int64 { return int64(k.Entropy%3) * 100 },
			Loss:      p(loss) / 2, PathLoss: map[uint16]float64{1: p(loss)},
			Bursty:  &GilbertElliott{PGoodToBad: p(burst) / 4, PBadToGood: 0.5, LossBad: 1},
			Reorder: p(reorder), ReorderDelay: 3000, Duplicate: p(dup), Corrupt: p(corrupt),
			Blackouts: []Blackout{{Entropy: 2, AnyPlane: true, At: 5000}},
		})
		// Each packet carries its index into sent three times, so that
		// one flipped bit cannot hide which packet it was.
		var sent [][]byte
		mk := func(n int) []byte {
			b := numbered(0, 24+n)
			for j := range 3 {
				binary.BigEndian.PutUint64(b[8*j:], uint64(len(sent)))
			}
			sent = append(sent, b)
			return b
		}
		check := func(_ Side, pkt []byte, _ PathKey) {
			require.GreaterOrEqual(t, len(pkt), 24)
			a, b, c := seqOf(string(pkt[0:8])), seqOf(string(pkt[8:16])), seqOf(string(pkt[16:24]))
			idx := a
			if a != b && a != c {
				idx = b
			}
			require.Less(t, idx, uint64(len(sent)))
			want := sent[idx]
			require.Len(t, pkt, len(want))
			flipped := 0
			for i := range pkt {
				flipped += bits.OnesCount8(pkt[i] ^ want[i])
			}
			require.LessOrEqual(t, flipped, 1)
		}
		now, last := int64(0), int64(0)
		for i, op := range ops {
			now += int64(op) * 7
			if op%5 == 0 {
				l.Deliver(now, check)
				continue
			}
			l.Send(now, Side(i%2), mk(int(op)), PathKey{Entropy: uint16(op % 4), Plane: op % 2})
		}
		for {
			at, ok := l.NextDelivery()
			if !ok {
				break
			}
			require.GreaterOrEqual(t, at, last)
			last = at
			l.Deliver(at, check)
		}
		s := l.Stats()
		require.Equal(t, uint64(len(sent)), s.Sent)
		require.Equal(t, s.Sent-s.Dropped()+s.Duplicated, s.Delivered)
	})
}
