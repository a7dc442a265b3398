package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

func shareConfig() Config {
	c := Config{LinkRateBps: 100e9, HintUtilization: 1}.Defaults()
	return c
}

// Unlimited senders split the link evenly, and each new sender lowers the
// level at once (its first packet counts).
func TestFairShareEvenSplit(t *testing.T) {
	cfg := shareConfig()
	var f fairShare
	conns := make([]*Conn, 4)
	for i := range conns {
		conns[i] = &Conn{}
		f.onReceive(&cfg, conns[i], verbs.Time(i), 1000, false, 0)
		if got, want := f.hintMbps(&cfg, conns[i]), uint32(100e3/(i+1)); got != want {
			t.Fatalf("after %d senders: hint %d Mbit/s, want %d", i+1, got, want)
		}
	}
	stranger := &Conn{}
	if f.hintMbps(&cfg, stranger) != 0 {
		t.Fatalf("a connection that sent nothing gets a hint")
	}
}

// A sender that uses less than half of its share is limited by its own
// demand; the others get what it leaves (max-min).
func TestFairShareHonoursSmallDemand(t *testing.T) {
	cfg := shareConfig()
	var f fairShare
	a, b := &Conn{}, &Conn{}
	now := verbs.Time(0)
	f.onReceive(&cfg, a, now, 1000, false, 0)
	f.onReceive(&cfg, b, now, 1000, false, 0)
	// Several intervals: b sends 5 Gb/s, a sends whatever it is given.
	step := 100 * time.Microsecond
	for i := 0; i < 10; i++ {
		ha := float64(f.hintMbps(&cfg, a)) * 1e6
		now = now.Add(step)
		f.onReceive(&cfg, a, now, int(ha/8*step.Seconds()), false, 0)
		f.onReceive(&cfg, b, now, int(5e9/8*step.Seconds()), false, 0)
	}
	hb := float64(f.hintMbps(&cfg, b)) * 1e6
	ha := float64(f.hintMbps(&cfg, a)) * 1e6
	if hb > 30e9 || hb < 5e9 {
		t.Fatalf("demand-limited sender offered %.1f Gb/s, want between its 5 Gb/s and the even split", hb/1e9)
	}
	if ha < 70e9 {
		t.Fatalf("unlimited sender offered %.1f Gb/s, want the rest of the link", ha/1e9)
	}
}

// A sender that goes quiet for a whole interval leaves the active set.
func TestFairShareForgetsIdle(t *testing.T) {
	cfg := shareConfig()
	var f fairShare
	a, b := &Conn{}, &Conn{}
	f.onReceive(&cfg, a, 0, 1000, false, 0)
	f.onReceive(&cfg, b, 0, 1000, false, 0)
	for i := 1; i <= 3; i++ {
		f.onReceive(&cfg, a, verbs.Time(i)*verbs.Time(time.Millisecond), 1000, false, 0)
	}
	// a sends little, so its own hint follows its demand; the level an
	// unlimited sender would get is the whole link again.
	if f.level != 100e9 || len(f.active) != 1 {
		t.Fatalf("level %.0f with %d active, want the whole link for the one sender", f.level, len(f.active))
	}
	if b.share.listed {
		t.Fatalf("idle sender still listed")
	}
}

// CE-marked arrivals shrink what the shares add up to, so that a standing
// queue drains; unmarked intervals restore it.
func TestFairShareDrainsOnMarks(t *testing.T) {
	cfg := shareConfig()
	var f fairShare
	a := &Conn{}
	now := verbs.Time(0)
	f.onReceive(&cfg, a, now, 1000, true, 0)
	now = now.Add(cfg.HintInterval)
	f.onReceive(&cfg, a, now, 1000, true, 0)
	if f.level != 50e9 {
		t.Fatalf("every byte marked: level %.0f, want half the link", f.level)
	}
	now = now.Add(cfg.HintInterval)
	f.onReceive(&cfg, a, now, 1000, false, 0)
	now = now.Add(cfg.HintInterval)
	f.onReceive(&cfg, a, now, 1000, false, 0)
	if f.level != 100e9 {
		t.Fatalf("marks gone: level %.0f, want the whole link", f.level)
	}
}

// Without a link rate there are no hints.
func TestFairShareDisabled(t *testing.T) {
	cfg := Config{}.Defaults()
	var f fairShare
	a := &Conn{}
	f.onReceive(&cfg, a, 0, 1000, false, 0)
	if f.hintMbps(&cfg, a) != 0 {
		t.Fatalf("hint without a link rate")
	}
}

// ACK hold: AckDelay while a queue drains, before the first interval and
// for a connection that only just joined; once settled with no queue, as
// long as the sender takes to send AckEvery packets at its hint, within
// [AckDelay, 4 × AckDelay].
func TestFairShareAckHold(t *testing.T) {
	cfg := shareConfig()
	var f fairShare
	conns := make([]*Conn, 16)
	for i := range conns {
		conns[i] = &Conn{limit: connLimit{pktBytes: 4000}}
		f.onReceive(&cfg, conns[i], 0, 1000, false, 0)
	}
	c := conns[0]
	if d := f.ackHold(&cfg, c, 0); d != cfg.AckDelay {
		t.Fatalf("hold %v before any interval was measured, want AckDelay", d)
	}
	// Everyone sends its share, unmarked, for a while: no queue here.
	now := verbs.Time(0)
	step := cfg.HintInterval
	for k := 0; k < 20; k++ {
		now = now.Add(step)
		for _, x := range conns {
			f.onReceive(&cfg, x, now, int(float64(f.hintMbps(&cfg, x))*1e6/8*step.Seconds()), false, now)
		}
	}
	// 16 senders: 6.25 Gb/s each; 8 packets of 4000 bytes take 41 µs: the
	// hold stops at 4 × AckDelay.
	if d := f.ackHold(&cfg, c, now); d != 4*cfg.AckDelay {
		t.Fatalf("hold %v for one of 16 settled senders, want 4 × AckDelay", d)
	}
	late := &Conn{limit: connLimit{pktBytes: 4000}}
	f.onReceive(&cfg, late, now, 1000, false, now)
	if d := f.ackHold(&cfg, late, now.Add(step)); d != cfg.AckDelay {
		t.Fatalf("hold %v for a sender that just joined, want AckDelay", d)
	}
	// A marked interval: the queue drains, ACKs go out within AckDelay.
	for k := 0; k < 2; k++ {
		now = now.Add(step)
		for _, x := range conns {
			f.onReceive(&cfg, x, now, 4000, true, now)
		}
	}
	if d := f.ackHold(&cfg, c, now); d != cfg.AckDelay {
		t.Fatalf("hold %v while CE marks arrive, want AckDelay", d)
	}
	// A lone fast sender: 8 packets at 100 Gb/s take 2.6 µs: AckDelay.
	var g fairShare
	solo := &Conn{limit: connLimit{pktBytes: 4000}}
	now = 0
	for k := 0; k < 20; k++ {
		now = now.Add(step)
		g.onReceive(&cfg, solo, now, int(100e9/8*step.Seconds()), false, now)
	}
	if d := g.ackHold(&cfg, solo, now); d != cfg.AckDelay {
		t.Fatalf("hold %v for a lone sender at line rate, want AckDelay", d)
	}
}
