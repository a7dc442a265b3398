package metaroce

import (
	"testing"
	"time"
)

// Pacing spaces packets at the hint rate; the in-flight cap follows
// hint × (minRTT + AckDelay) × InflightRTTs, at least one packet.
func TestConnLimit(t *testing.T) {
	cfg := Config{}.Defaults()
	l := connLimit{pktBytes: 4000}
	if l.paced(0) || l.blockedUntil(&cfg, 0, 0) > 0 {
		t.Fatalf("limited without a hint")
	}
	l.setHint(&cfg, 8000) // 8 Gb/s: 4000 bytes take 4 µs
	l.sent(0, 4000)
	if l.nextSend != Time(4*time.Microsecond) || !l.paced(Time(time.Microsecond)) {
		t.Fatalf("next send at %d, want 4µs", l.nextSend)
	}
	l.sample(10 * time.Microsecond)
	// 3 × 1 GB/s × 15 µs = 45000 bytes = 11 packets.
	if n := l.maxInflightPackets(&cfg); n != 11 {
		t.Fatalf("in-flight cap %d packets, want 11", n)
	}
	l.inflight = 11
	if l.blockedUntil(&cfg, 0, 0) != Never {
		t.Fatalf("not held at the cap")
	}
	if l.blockedUntil(&cfg, 0, 1) == Never {
		t.Fatalf("a packet known lost still counted against the cap")
	}
	l.setHint(&cfg, 1)
	if n := l.maxInflightPackets(&cfg); n != 1 {
		t.Fatalf("in-flight cap %d at a tiny hint, want 1", n)
	}
}
