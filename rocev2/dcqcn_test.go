package rocev2

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// testDCQCN has round numbers so the expected values can be worked out by
// hand: line rate 100 Gb/s, g = 1/4, alpha starts at 1, alpha period
// 10 µs, cuts at most every 4 µs, increase timer 100 µs, byte counter
// 1000 B, F = 1, R_AI = 1 Gb/s, R_HAI = 10 Gb/s.
func testDCQCN() *DCQCNConfig {
	c := DCQCNConfig{G: 0.25, InitialAlpha: 1, AlphaUpdatePeriod: 10 * time.Microsecond,
		RateReduceMonitorPeriod: 4 * time.Microsecond, TimeReset: 100 * time.Microsecond, ByteReset: 1000,
		Threshold: 1, AIRateBps: 1e9, HAIRateBps: 10e9}.Defaults()
	return &c
}

const us = verbs.Time(time.Microsecond)

func TestDCQCNFirstCNPHalvesTheRate(t *testing.T) {
	r := newRateLimiter(testDCQCN(), 100e9)
	require.Equal(t, 100e9, r.rate(0))
	r.onCNP(0)
	require.True(t, r.limited)
	// alpha = 1: Rc = 100 * (1 - 1/2) = 50; the target is the old rate.
	require.Equal(t, 50e9, r.rc)
	require.Equal(t, 100e9, r.rt)
	require.Equal(t, uint64(1), r.cuts)
}

func TestDCQCNAlphaUpdates(t *testing.T) {
	r := newRateLimiter(testDCQCN(), 100e9)
	r.onCNP(0) // alpha = 1, period [0, 10us)
	// No CNP in [0,10): alpha = 0.75 at 10 µs; [10,20): 0.5625.
	r.advanceAlpha(10 * us)
	require.Equal(t, 0.75, r.alpha)
	r.advanceAlpha(25 * us)
	require.Equal(t, 0.5625, r.alpha)
	// A CNP in [20,30) (at 25 µs): at 30 µs alpha = 0.75*0.5625 + 0.25.
	r.onCNP(25 * us)
	r.advanceAlpha(30 * us)
	require.Equal(t, 0.75*0.5625+0.25, r.alpha)
	// Five quiet periods at once: alpha *= 0.75^5.
	a := r.alpha
	r.advanceAlpha(80 * us)
	require.InDelta(t, a*0.75*0.75*0.75*0.75*0.75, r.alpha, 1e-15)
}

func TestDCQCNCutsAtMostOncePerMonitorPeriod(t *testing.T) {
	r := newRateLimiter(testDCQCN(), 100e9)
	r.onCNP(0) // cut to 50
	r.onCNP(1 * us)
	r.onCNP(2 * us)
	require.Equal(t, 50e9, r.rc, "CNPs inside the monitor period wait")
	require.True(t, r.cutPending)
	// The pending cut happens at 4 µs with alpha still 1 (its period ends at
	// 10 µs): 50 -> 25. No increase happened since the last cut, so the
	// target stays at 100 (ClampTargetRate off).
	require.Equal(t, 25e9, r.rate(4*us))
	require.Equal(t, 100e9, r.rt)
	require.Equal(t, uint64(2), r.cuts)
	require.Equal(t, 25e9, r.rate(7*us), "one cut for the CNPs of one period")
}

func TestDCQCNClampTargetRate(t *testing.T) {
	cfg := testDCQCN()
	cfg.ClampTargetRate = true
	r := newRateLimiter(cfg, 100e9)
	r.onCNP(0)
	r.onCNP(4 * us)
	require.Equal(t, 25e9, r.rc)
	require.Equal(t, 50e9, r.rt, "with clamping the target follows every cut")
}

// TestDCQCNIncreasePhases walks fast recovery, additive and hyper increase
// from Rc = 25, Rt = 50 (two clamped cuts at 0 and 4 µs; timer due at
// 104 µs).
func TestDCQCNIncreasePhases(t *testing.T) {
	cfg := testDCQCN()
	cfg.ClampTargetRate = true
	r := newRateLimiter(cfg, 100e9)
	r.onCNP(0)
	r.onCNP(4 * us)
	// Byte counter event 1 (T=0, BC=1): max = 1 <= F: fast recovery.
	r.onSent(10*us, 1000)
	require.Equal(t, 37.5e9, r.rc)
	require.Equal(t, 50e9, r.rt)
	// BC=2, T=0: max > F, min <= F: additive increase.
	r.onSent(11*us, 1000)
	require.Equal(t, 51e9, r.rt)
	require.Equal(t, (51e9+37.5e9)/2, r.rc)
	// Timer at 104 µs: T=1, BC=2: additive.
	require.Equal(t, (52e9+44.25e9)/2, r.rate(104*us))
	require.Equal(t, 52e9, r.rt)
	// BC=3, T=1: additive.
	r.onSent(105*us, 1000)
	require.Equal(t, 53e9, r.rt)
	require.Equal(t, (53e9+48.125e9)/2, r.rc)
	// Timer at 204 µs: T=2, BC=3: min > F: hyper increase.
	require.Equal(t, (63e9+50.5625e9)/2, r.rate(204*us))
	require.Equal(t, 63e9, r.rt)
	require.Equal(t, uint64(5), r.increases)
	// A byte count of several thresholds at once runs several events.
	r.onSent(205*us, 2500)
	require.Equal(t, uint64(7), r.increases)
	require.Equal(t, int64(500), r.bytes)
}

// TestDCQCNRecoversAndReleases: after one cut (Rc 50, Rt 100) the timer
// alone brings the rate back: 75 (fast recovery), then additive steps with
// Rt capped at 100: 87.5, 93.75, 96.875, 98.4375, 99.21875 -> within R_AI of
// the line rate: released.
func TestDCQCNRecoversAndReleases(t *testing.T) {
	r := newRateLimiter(testDCQCN(), 100e9)
	r.onCNP(0)
	want := []float64{75e9, 87.5e9, 93.75e9, 96.875e9, 98.4375e9}
	for i, w := range want {
		require.Equal(t, w, r.rate(verbs.Time(i+1)*100*us), "event %d", i+1)
		require.True(t, r.limited)
	}
	require.Equal(t, 100e9, r.rate(600*us))
	require.False(t, r.limited)
	require.Equal(t, uint64(1), r.releases)
	// Released: the next CNP starts over with the initial alpha.
	r.onCNP(700 * us)
	require.Equal(t, 50e9, r.rc)
}

func TestDCQCNMinRateAndDecreaseBound(t *testing.T) {
	cfg := testDCQCN()
	cfg.MinRateBps = 30e9
	r := newRateLimiter(cfg, 100e9)
	r.onCNP(0)
	r.onCNP(4 * us)
	require.Equal(t, 30e9, r.rc, "never below MinRateBps")

	cfg = testDCQCN()
	cfg.MinDecFactor = 0.8
	r = newRateLimiter(cfg, 100e9)
	r.onCNP(0)
	require.Equal(t, 80e9, r.rc, "one cut keeps at least MinDecFactor of the rate")

	cfg = testDCQCN()
	cfg.RateOnFirstCNPBps = 10e9
	r = newRateLimiter(cfg, 100e9)
	r.onCNP(0)
	require.Equal(t, 10e9, r.rc)
	require.Equal(t, 10e9, r.rt)
}

func TestDCQCNDefaultsAreTheConnectXOnes(t *testing.T) {
	d := DCQCNConfig{}.Defaults()
	require.Equal(t, 50*time.Microsecond, d.CNPInterval)
	require.Equal(t, 5.0/1024, d.G)
	require.Equal(t, time.Microsecond, d.AlphaUpdatePeriod)
	require.Equal(t, 1023.0/1024, d.InitialAlpha)
	require.Equal(t, 4*time.Microsecond, d.RateReduceMonitorPeriod)
	require.Equal(t, 0.5, d.MinDecFactor)
	require.Equal(t, 1e6, d.MinRateBps)
	require.Equal(t, 300*time.Microsecond, d.TimeReset)
	require.Equal(t, 32767, d.ByteReset)
	require.Equal(t, 1, d.Threshold)
	require.Equal(t, 5e6, d.AIRateBps)
	require.Equal(t, 50e6, d.HAIRateBps)
	require.False(t, d.ClampTargetRate)
	require.False(t, d.NoClampAfterTimeInc)
	require.NoError(t, d.Validate())
	// First cut with the default alpha (1023/1024): Rc = 100 * (1 - 1023/2048).
	r := newRateLimiter(&d, 100e9)
	r.onCNP(0)
	require.InDelta(t, 100e9*(1-1023.0/2048), r.rc, 1)
}

func TestNotifierPacesCNPs(t *testing.T) {
	n := notifier{interval: 50 * time.Microsecond}
	require.True(t, n.onCE(0))
	require.False(t, n.onCE(1), "one pending at a time")
	n.pending = false
	require.False(t, n.onCE(49*us))
	require.True(t, n.onCE(50*us))
}
