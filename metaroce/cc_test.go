package metaroce

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
)

func ccConfig() Config { return Config{}.Defaults() }

// A round with marks cuts the window by alpha/2; rounds without marks
// grow it by about one packet per round, up to PathWindow.
func TestPathCCAIMD(t *testing.T) {
	cfg := ccConfig()
	cc := pathCC{cwnd: 32}
	rtt := 10 * time.Microsecond
	now := verbs.Time(0)
	// Every packet marked for many rounds: alpha climbs towards 1 and the
	// window falls to MinWindow.
	for i := 0; i < 200; i++ {
		now = now.Add(rtt)
		cc.onAck(&cfg, now, 8, 8, rtt)
	}
	// The window settles where a round's additive increase (8 ACKs
	// over the window) meets the halving: about two packets.
	if cc.window() > 2*cfg.MinWindow || cc.alpha < 0.9 {
		t.Fatalf("after marked rounds: window %d alpha %.2f, want at most %d and alpha near 1", cc.window(), cc.alpha, 2*cfg.MinWindow)
	}
	// Unmarked rounds: one packet more per window's worth of ACKs.
	before := cc.cwnd
	for i := 0; i < 10; i++ {
		now = now.Add(rtt)
		w := cc.window()
		cc.onAck(&cfg, now, w, 0, rtt)
	}
	if grown := cc.cwnd - before; grown < 8 || grown > 12 {
		t.Fatalf("10 unmarked rounds grew the window by %.1f packets, want about 10", grown)
	}
	for i := 0; i < 10000; i++ {
		now = now.Add(rtt)
		cc.onAck(&cfg, now, 64, 0, rtt)
	}
	if cc.window() != cfg.PathWindow {
		t.Fatalf("window %d, want the cap %d", cc.window(), cfg.PathWindow)
	}
}

// One marked round with alpha = g cuts by g/2 only (DCTCP's gentle start).
func TestPathCCFirstMarkIsGentle(t *testing.T) {
	cfg := ccConfig()
	cc := pathCC{cwnd: 64}
	cc.onAck(&cfg, verbs.Time(time.Microsecond), 10, 10, time.Microsecond)
	want := 64 * (1 - cfg.ECNGain/2)
	if d := cc.cwnd - want; d < -0.5 || d > 1 {
		t.Fatalf("cwnd %.2f after one fully marked round, want about %.2f", cc.cwnd, want)
	}
}

// With congestion control off the window never moves.
func TestPathCCDisabled(t *testing.T) {
	cfg := ccConfig()
	cfg.DisableCC = true
	cc := pathCC{cwnd: 64}
	for i := 1; i < 100; i++ {
		cc.onAck(&cfg, verbs.Time(i*1000), 8, 8, time.Microsecond)
	}
	if cc.window() != 64 {
		t.Fatalf("window %d with DisableCC, want 64", cc.window())
	}
}

// The loss average tracks the fraction of packets lost.
func TestPathCCLossAverage(t *testing.T) {
	var cc pathCC
	for i := 0; i < 2000; i++ {
		if i%2 == 0 {
			cc.lost()
		} else {
			cc.delivered()
		}
	}
	if cc.loss < 0.4 || cc.loss > 0.6 {
		t.Fatalf("loss average %.2f at 50%% loss", cc.loss)
	}
}
