package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

// Pacing spaces packets at the hint rate; the in-flight cap follows
// hint × (RTT + AckDelay) × InflightRTTs, at least one packet.
func TestConnLimit(t *testing.T) {
	cfg := Config{}.Defaults()
	l := connLimit{pktBytes: 4000}
	if l.blockedUntil(&cfg, 0, 0) != 0 || l.maxInflightPackets(&cfg) != cfg.InitialInflight {
		t.Fatalf("before the first ACK: want InitialInflight packets, unpaced")
	}
	l.setHint(&cfg, 0, 0) // an ACK without a hint: no limit at all
	if l.paced(0) || l.maxInflightPackets(&cfg) < 1<<20 {
		t.Fatalf("limited without a hint")
	}
	l.setHint(&cfg, 0, 8000) // 8 Gb/s: 4000 bytes take 4 µs
	// Gaps are jittered within [0.5, 1.5) of the exact 4 µs, mean exact.
	const n = 1000
	for i := 0; i < n; i++ {
		prev := l.nextSend
		l.sent(l.nextSend, 4000)
		if gap := l.nextSend - prev; gap < verbs.Time(2*time.Microsecond) || gap >= verbs.Time(6*time.Microsecond) {
			t.Fatalf("gap %d ns, want 2..6µs", gap)
		}
	}
	if mean := float64(l.nextSend) / n; mean < 3800 || mean > 4200 {
		t.Fatalf("mean gap %.0f ns, want about 4000", mean)
	}
	if !l.paced(l.nextSend - 1) {
		t.Fatalf("not paced before nextSend")
	}
	l.sample(10 * time.Microsecond)
	if n := l.maxInflightPackets(&cfg); n != cfg.InitialInflight {
		t.Fatalf("in-flight cap %d before any ACK grew it, want %d", n, cfg.InitialInflight)
	}
	for i := 0; i < 100; i++ {
		l.acked()
	}
	// 4 × 1 GB/s × 15 µs = 60000 bytes = 15 packets.
	if n := l.maxInflightPackets(&cfg); n != 15 {
		t.Fatalf("in-flight cap %d packets, want 15", n)
	}
	l.inflight = 15
	if l.blockedUntil(&cfg, 0, 0) != verbs.Never {
		t.Fatalf("not held at the cap")
	}
	if l.blockedUntil(&cfg, 0, 1) == verbs.Never {
		t.Fatalf("a packet known lost still counted against the cap")
	}
	l.setHint(&cfg, 0, 1)
	if n := l.maxInflightPackets(&cfg); n != 1 {
		t.Fatalf("in-flight cap %d at a tiny hint, want 1", n)
	}
}

// The in-flight cap follows the smoothed RTT, not only the smallest: a
// sender whose ACKs take longer (a busy NIC of its own, a receiver that
// holds ACKs) keeps its hint's worth in flight; but no more than 4 × the
// smallest RTT, so a queue cannot raise its own cap without bound.
func TestConnLimitFollowsSmoothedRTT(t *testing.T) {
	cfg := Config{}.Defaults()
	l := connLimit{pktBytes: 4000}
	l.setHint(&cfg, 0, 8000) // 1 GB/s
	for i := 0; i < 100; i++ {
		l.acked()
	}
	l.sample(10 * time.Microsecond)
	// 4 × 1 GB/s × (10 + 5) µs = 60000 bytes = 15 packets.
	if n := l.maxInflightPackets(&cfg); n != 15 {
		t.Fatalf("in-flight cap %d packets at a 10 µs RTT, want 15", n)
	}
	for i := 0; i < 200; i++ {
		l.sample(25 * time.Microsecond)
	}
	// The smoothed RTT is now ~25 µs: 4 × 1 GB/s × 30 µs = 30 packets.
	if n := l.maxInflightPackets(&cfg); n < 29 || n > 30 {
		t.Fatalf("in-flight cap %d packets at a 25 µs smoothed RTT, want 30", n)
	}
	for i := 0; i < 200; i++ {
		l.sample(time.Millisecond)
	}
	// Bounded by 4 × minRTT: 4 × 1 GB/s × (40 + 5) µs = 45 packets.
	if n := l.maxInflightPackets(&cfg); n != 45 {
		t.Fatalf("in-flight cap %d packets behind a 1 ms queue, want 45 (4 × minRTT)", n)
	}
}

// A low hint (1 Mbit/s, what an attacker's forged ACK would carry) pushes
// the next send 33 ms out; the next ACK with a genuine hint undoes it at
// once: the next packet may go within one gap at the new rate.
func TestLowHintUndoneByNextAck(t *testing.T) {
	cfg := Config{}.Defaults()
	l := connLimit{pktBytes: 4136}
	l.setHint(&cfg, 0, 8000)
	l.sent(0, 4136)
	l.setHint(&cfg, 0, 1)
	now := verbs.Time(10 * time.Microsecond)
	l.sent(now, 4136)
	if d := l.nextSend - now; d < verbs.Time(16*time.Millisecond) {
		t.Fatalf("a 1 Mbit/s hint set a gap of %v, want ~33 ms", time.Duration(d))
	}
	now += verbs.Time(20 * time.Microsecond)
	l.setHint(&cfg, now, 8000)
	if d := l.nextSend - now; d > verbs.Time(7*time.Microsecond) {
		t.Fatalf("after an 8 Gb/s hint the next send is %v away, want at most 1.5 gaps (~6.2 µs)", time.Duration(d))
	}
	// A hint that does not double leaves the schedule alone.
	l.setHint(&cfg, now, 1)
	l.sent(now, 4136)
	before := l.nextSend
	l.setHint(&cfg, now, 1)
	l.setHint(&cfg, now, 1)
	if l.nextSend != before {
		t.Fatal("an equal hint moved the schedule")
	}
}
