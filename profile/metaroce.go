package profile

import (
	"errors"
	"fmt"
	"strings"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// Core returns the protocol core's configuration for these parameters
// (zero fields take the core's defaults). The caller sets the identity
// (Node, Incarnation), AcceptIncoming and the queue depths.
func (m Metaroce) Core() mr.Config {
	return mr.Config{
		Paths: m.Paths, Planes: m.Planes, MTU: m.MTU, PathWindow: m.PathWindow, AckEvery: m.AckEvery,
		EntropyBase: verbs.Entropy(m.EntropyBase), LinkRateBps: m.LinkGbps * 1e9, AckDelay: m.AckDelay,
		MinRTO: m.MinRTO, MaxRTO: m.MaxRTO, MinWindow: m.MinWindow, ECNGain: m.ECNGain,
		HintUtilization: m.HintUtilization, HintInterval: m.HintInterval, InflightRTTs: m.InflightRTTs,
		InitialInflight: m.InitialInflight, PathFailAfter: m.PathFailAfter, PathReprobe: m.PathReprobe,
		PathLossFail: m.PathLossFail, RerollRounds: m.RerollRounds, DisableCC: m.DisableCC,
	}
}

// coreKeys names the profile key of each core field the profile sets.
var coreKeys = map[string]string{
	"Paths": "metaroce.paths", "Planes": "metaroce.planes", "MTU": "metaroce.mtu",
	"PathWindow": "metaroce.path_window", "AckEvery": "metaroce.ack_every",
	"EntropyBase": "metaroce.entropy_base", "LinkRateBps": "metaroce.link_gbps",
	"AckDelay": "metaroce.ack_delay", "MinRTO": "metaroce.min_rto", "MaxRTO": "metaroce.max_rto",
	"MinWindow": "metaroce.min_window", "ECNGain": "metaroce.ecn_gain",
	"HintUtilization": "metaroce.hint_utilization", "HintInterval": "metaroce.hint_interval",
	"InflightRTTs": "metaroce.inflight_rtts", "InitialInflight": "metaroce.initial_inflight",
	"PathFailAfter": "metaroce.path_fail_after", "PathReprobe": "metaroce.path_reprobe",
	"PathLossFail": "metaroce.path_loss_fail", "RerollRounds": "metaroce.reroll_rounds",
}

// validateCore lets the core judge the parameters, and names the key.
func (m Metaroce) validateCore() error {
	err := m.Core().Defaults().Validate()
	if err == nil {
		return nil
	}
	var ce *mr.ConfigError
	if errors.As(err, &ce) {
		msg := "is " + strings.TrimPrefix(ce.Msg, "= ")
		if k, ok := coreKeys[ce.Field]; ok {
			return bad(k, "%s", msg)
		}
		return bad("metaroce", "%s %s", ce.Field, msg)
	}
	return bad("metaroce", "%v", fmt.Sprint(err))
}
