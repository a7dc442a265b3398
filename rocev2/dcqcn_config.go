package rocev2

import (
	"time"
)

// DCQCNConfig holds the parameters of DCQCN (Zhu et al., "Congestion
// Control for Large-Scale RDMA Deployments", SIGCOMM 2015) as NVIDIA
// ConnectX NICs implement it. Defaults are the ConnectX firmware defaults
// (mlxconfig ROCE_CC names in brackets; the same values are listed in
// NVIDIA's "DCQCN CC Parameters" documentation and MLNX_OFED's
// /sys/class/net/*/ecn/ files), except the CNP interval, which is the
// paper's N = 50 µs. Where the paper's value differs it is noted.
//
// Every rate is in bits per second; zero fields take their defaults. The
// `key` tags are the keys of the rocev2.dcqcn section (see Config);
// MaxRateBps has none: the backend sets it from the port's speed.
type DCQCNConfig struct {
	// Disable turns congestion control off: no CNPs are sent and CNPs
	// received are counted and ignored. The QP then always sends at line
	// rate.
	Disable bool `key:"disable"`

	// CNPInterval: the notification point (receiver) sends at most one CNP
	// per QP per interval, for CE-marked packets. Default 50 µs (the
	// paper's N; ConnectX's MIN_TIME_BETWEEN_CNPS defaults lower).
	CNPInterval time.Duration `key:"cnp_interval"`

	// G is the alpha gain g. Alpha is updated once per AlphaUpdatePeriod:
	// alpha = (1-g)*alpha + g if a CNP arrived in the period, else
	// alpha = (1-g)*alpha. Default 5/1024 [DCE_TCP_G = 1019: g =
	// (1024-1019)/1024]; the paper uses 1/256.
	G float64 `key:"g"`
	// AlphaUpdatePeriod is the alpha timer. Default 1 µs [DCE_TCP_RTT];
	// the paper uses 55 µs.
	AlphaUpdatePeriod time.Duration `key:"alpha_update_period"`
	// InitialAlpha is alpha at a QP's first CNP. Default 1023/1024
	// [INITIAL_ALPHA_VALUE = 1023]; the paper uses 1.
	InitialAlpha float64 `key:"initial_alpha"`

	// RateReduceMonitorPeriod: the rate is cut at most once per period; a
	// CNP inside the period cuts at its end. Default 4 µs
	// [RATE_REDUCE_MONITOR_PERIOD].
	RateReduceMonitorPeriod time.Duration `key:"rate_reduce_monitor_period"`
	// MinDecFactor bounds one cut: the new rate keeps at least this
	// fraction of the current rate. Default 0.5 [RPG_MIN_DEC_FAC = 50 %].
	// A cut is Rc *= (1 - alpha/2) [RPG_GD = 11: alpha/2^11 in the NIC's
	// 10-bit fixed point], so with alpha <= 1 the bound never binds.
	MinDecFactor float64 `key:"min_dec_factor"`
	// MinRateBps is the lowest rate a cut reaches. Default 1 Mb/s
	// [RPG_MIN_RATE].
	MinRateBps float64 `key:"min_rate_bps"`
	// MaxRateBps caps the rate; 0 means the line rate [RPG_MAX_RATE = 0].
	MaxRateBps float64
	// RateOnFirstCNP, when non-zero, is the rate (current and target) set
	// at a QP's first CNP instead of a cut. Default 0
	// [RATE_TO_SET_ON_FIRST_CNP].
	RateOnFirstCNPBps float64 `key:"rate_on_first_cnp_bps"`
	// ClampTargetRate sets the target to the current rate at every cut.
	// When false (default, [CLAMP_TGT_RATE = 0]) the target is updated only
	// if the rate increased since the last cut (by the byte counter, or by
	// the timer when ClampTargetRateAfterTimeInc), so back-to-back cuts do
	// not drag the target down.
	ClampTargetRate bool `key:"clamp_target_rate"`
	// ClampTargetRateAfterTimeInc: see ClampTargetRate. Default true
	// [CLAMP_TGT_RATE_AFTER_TIME_INC = 1]. Set NoClampAfterTimeInc to turn
	// it off (a bool cannot default to true).
	NoClampAfterTimeInc bool `key:"no_clamp_after_time_inc"`

	// TimeReset is the rate-increase timer T. Default 300 µs
	// [RPG_TIME_RESET]; the paper uses 55 µs.
	TimeReset time.Duration `key:"time_reset"`
	// ByteReset is the rate-increase byte counter B, in bytes sent.
	// Default 32767 [RPG_BYTE_RESET]; the paper uses 10 MB.
	ByteReset int `key:"byte_reset"`
	// Threshold is F, the number of increase events spent in fast
	// recovery. Default 1 [RPG_THRESHOLD]; the paper uses 5.
	Threshold int `key:"threshold"`
	// AIRateBps is R_AI, the additive increase step of the target rate.
	// Default 5 Mb/s [RPG_AI_RATE]; the paper uses 40 Mb/s.
	AIRateBps float64 `key:"ai_rate_bps"`
	// HAIRateBps is R_HAI, the hyper increase step. Default 50 Mb/s
	// [RPG_HAI_RATE]. The paper multiplies the step by the number of
	// stages past F; ConnectX adds a constant step, as done here.
	HAIRateBps float64 `key:"hai_rate_bps"`
}

// Defaults returns c with every zero field set to its default.
func (c DCQCNConfig) Defaults() DCQCNConfig {
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	setDur(&c.CNPInterval, 50*time.Microsecond)
	setF(&c.G, 5.0/1024)
	setDur(&c.AlphaUpdatePeriod, time.Microsecond)
	setF(&c.InitialAlpha, 1023.0/1024)
	setDur(&c.RateReduceMonitorPeriod, 4*time.Microsecond)
	setF(&c.MinDecFactor, 0.5)
	setF(&c.MinRateBps, 1e6)
	setDur(&c.TimeReset, 300*time.Microsecond)
	if c.ByteReset == 0 {
		c.ByteReset = 32767
	}
	if c.Threshold == 0 {
		c.Threshold = 1
	}
	setF(&c.AIRateBps, 5e6)
	setF(&c.HAIRateBps, 50e6)
	return c
}

// Validate reports the first field out of range.
func (c DCQCNConfig) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"CNPInterval", c.CNPInterval}, {"AlphaUpdatePeriod", c.AlphaUpdatePeriod},
		{"RateReduceMonitorPeriod", c.RateReduceMonitorPeriod}, {"TimeReset", c.TimeReset},
	} {
		if d.v <= 0 {
			return cfgErr("DCQCN."+d.name, "= %v, want > 0", d.v)
		}
	}
	for _, f := range []struct {
		name   string
		v      float64
		lo, hi float64
	}{
		{"G", c.G, 1e-9, 1}, {"InitialAlpha", c.InitialAlpha, 1e-9, 1}, {"MinDecFactor", c.MinDecFactor, 0, 1},
		{"MinRateBps", c.MinRateBps, 1, 1e13}, {"MaxRateBps", c.MaxRateBps, 0, 1e13},
		{"RateOnFirstCNPBps", c.RateOnFirstCNPBps, 0, 1e13},
		{"AIRateBps", c.AIRateBps, 1, 1e13}, {"HAIRateBps", c.HAIRateBps, 1, 1e13},
	} {
		if !(f.v >= f.lo && f.v <= f.hi) {
			return cfgErr("DCQCN."+f.name, "= %v, want %v..%v", f.v, f.lo, f.hi)
		}
	}
	if c.ByteReset < 1 {
		return cfgErr("DCQCN.ByteReset", "= %d, want >= 1", c.ByteReset)
	}
	if c.Threshold < 0 || c.Threshold > 1000 {
		return cfgErr("DCQCN.Threshold", "= %d, want 0..1000", c.Threshold)
	}
	return nil
}
