package sim

import (
	"errors"
	"fmt"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// This file is metaroce's part of the simulator: its experiment
// parameters and how to build a host's device from them; the generic
// adapter (transport_verbs.go) does the rest. One metaroce.Endpoint per
// host carries all of that host's connections; each connection has one
// queue pair (stream 0) at each end.

func init() { Register(metaroceTransport{}) }

// MetaRoCEParams is the transport.metaroce section of an experiment file.
// Zero values take metaroce.Config's defaults.
type MetaRoCEParams struct {
	// MTU overrides transport.mtu for metaroce only: on an Ethernet
	// fabric with 9000-byte frames metaroce can carry 8 KiB payloads,
	// where RoCEv2's IB MTU stops at 4096.
	MTU             int      `yaml:"mtu"`
	Paths           int      `yaml:"paths"`
	Window          int      `yaml:"window"`
	AckEvery        int      `yaml:"ack_every"`
	AckDelay        Duration `yaml:"ack_delay"`
	InitialRTO      Duration `yaml:"initial_rto"`
	MinRTO          Duration `yaml:"min_rto"`
	MaxRTO          Duration `yaml:"max_rto"`
	PathFailAfter   int      `yaml:"path_fail_after"`
	PathReprobe     Duration `yaml:"path_reprobe"`
	Keepalive       Duration `yaml:"keepalive"`
	PeerDeadTimeout Duration `yaml:"peer_dead_timeout"`
	// Congestion control and path health (metaroce.Config documents each).
	MinWindow       int      `yaml:"min_window"`
	ECNGain         float64  `yaml:"ecn_gain"`
	DisableCC       bool     `yaml:"disable_cc"`
	HintUtilization float64  `yaml:"hint_utilization"`
	HintInterval    Duration `yaml:"hint_interval"`
	InflightRTTs    float64  `yaml:"inflight_rtts"`
	InitialInflight int      `yaml:"initial_inflight"`
	PathLossFail    float64  `yaml:"path_loss_fail"`
	RerollRounds    int      `yaml:"reroll_rounds"`
	// NoRateHints leaves the receiver's link rate unknown to the endpoint,
	// so it gives no rate hints (the senders rely on ECN alone).
	NoRateHints bool `yaml:"no_rate_hints"`
}

// core is the endpoint configuration for these parameters on hosts with
// planes NIC ports of nicGbps each.
func (p *MetaRoCEParams) core(planes, mtu int, nicGbps float64) mr.Config {
	if p.MTU != 0 {
		mtu = p.MTU
	}
	cfg := mr.Config{
		Planes: planes, MTU: mtu, Paths: p.Paths, PathWindow: p.Window,
		AckEvery: p.AckEvery, AckDelay: p.AckDelay.D(), InitialRTO: p.InitialRTO.D(),
		MinRTO: p.MinRTO.D(), MaxRTO: p.MaxRTO.D(), PathFailAfter: p.PathFailAfter,
		PathReprobe: p.PathReprobe.D(), KeepaliveInterval: p.Keepalive.D(),
		PeerDeadTimeout: p.PeerDeadTimeout.D(),
		MinWindow:       p.MinWindow, ECNGain: p.ECNGain, DisableCC: p.DisableCC,
		HintUtilization: p.HintUtilization, HintInterval: p.HintInterval.D(),
		InflightRTTs: p.InflightRTTs, InitialInflight: p.InitialInflight,
		PathLossFail: p.PathLossFail, RerollRounds: p.RerollRounds,
	}
	if !p.NoRateHints {
		// The receiver knows its link: every NIC port together.
		cfg.LinkRateBps = float64(planes) * nicGbps * 1e9
	}
	return cfg
}

// paramKeys names the experiment key of each core field set from them.
var paramKeys = map[string]string{
	"MTU": "mtu", "Paths": "paths", "PathWindow": "window", "AckEvery": "ack_every", "AckDelay": "ack_delay",
	"InitialRTO": "initial_rto", "MinRTO": "min_rto", "MaxRTO": "max_rto",
	"PathFailAfter": "path_fail_after", "PathReprobe": "path_reprobe", "KeepaliveInterval": "keepalive",
	"PeerDeadTimeout": "peer_dead_timeout", "MinWindow": "min_window", "ECNGain": "ecn_gain",
	"HintUtilization": "hint_utilization", "HintInterval": "hint_interval",
	"InflightRTTs": "inflight_rtts", "InitialInflight": "initial_inflight",
	"PathLossFail": "path_loss_fail", "RerollRounds": "reroll_rounds",
}

// CheckParams implements paramsChecker: the core judges the parameters
// when the file is loaded, and the error names the key.
func (metaroceTransport) CheckParams(c *Config, params any) error {
	cfg := params.(*MetaRoCEParams).core(min(c.Topology.Planes, mr.MaxPlanes), c.Transport.MTU, c.Topology.NICGbps)
	err := cfg.Defaults().Validate()
	var ce *mr.ConfigError
	if errors.As(err, &ce) {
		if k, ok := paramKeys[ce.Field]; ok {
			return fmt.Errorf("transport.metaroce.%s %s", k, ce.Msg)
		}
		return fmt.Errorf("transport.metaroce: %s %s (from topology or transport.mtu)", ce.Field, ce.Msg)
	}
	return err
}

type metaroceTransport struct{}

func (metaroceTransport) Name() string    { return "metaroce" }
func (metaroceTransport) UDPPort() uint16 { return mr.DefaultUDPPort }
func (metaroceTransport) NewParams() any  { return &MetaRoCEParams{} }

func (metaroceTransport) PacketLens(mtu int) (int, int) {
	return mr.HeaderLen + mr.MsgHeaderLen + mtu + mr.CRCLen, mr.HeaderLen + mr.AckPrefixLen + mr.AckBlockCompactLen + mr.CRCLen
}

func (metaroceTransport) NewWorld(env WorldEnv, params any) (World, error) {
	p := params.(*MetaRoCEParams)
	return newVerbsWorld(env, deviceSpec{name: "metaroce", holdPosts: true,
		newDevice: func(h int) (verbs.Device, error) {
			cfg := p.core(env.Planes, env.MTU, env.NICGbps)
			cfg.Node, cfg.Incarnation, cfg.AcceptIncoming = mr.NodeID(h+1), 1, true
			if cfg.Planes > mr.MaxPlanes {
				return nil, fmt.Errorf("metaroce: %d planes, at most %d", cfg.Planes, mr.MaxPlanes)
			}
			ep, err := mr.NewEndpoint(cfg)
			if err != nil {
				return nil, err
			}
			return ep.Device(), nil
		},
		placed:   func(s verbs.Session) uint64 { return s.(mr.Session).C.Counters().PayloadPlaced },
		counters: metaroceCounters,
	})
}

// metaroceCounters sums the connections' counters.
func metaroceCounters(ss []verbs.Session) []Field {
	var sum mr.ConnCounters
	var rto, probes, restores uint64
	for _, s := range ss {
		if s == nil {
			continue
		}
		c := s.(mr.Session).C
		k := c.Counters()
		sum.DataPacketsSent += k.DataPacketsSent
		sum.DataResent += k.DataResent
		sum.Retransmits += k.Retransmits
		sum.SackGaps += k.SackGaps
		sum.PathFailures += k.PathFailures
		sum.PathRerolls += k.PathRerolls
		sum.AcksSent += k.AcksSent
		sum.ECNEchoes += k.ECNEchoes
		sum.RNRNaksSent += k.RNRNaksSent
		sum.Duplicates += k.Duplicates
		for i := 0; i < c.NumPaths(); i++ {
			pc := c.PathCounters(verbs.PathID(i))
			rto += pc.RetransmitTimeout
			probes += pc.Probes
			restores += pc.Restores
		}
	}
	return []Field{
		{"data_packets", sum.DataPacketsSent}, {"data_resent", sum.DataResent},
		{"retransmits", sum.Retransmits}, {"sack_gaps", sum.SackGaps},
		{"rto_resends", rto}, {"tail_probes", probes}, {"path_failures", sum.PathFailures},
		{"path_restores", restores}, {"path_rerolls", sum.PathRerolls},
		{"acks", sum.AcksSent}, {"ecn_echoes", sum.ECNEchoes}, {"rnr_naks", sum.RNRNaksSent},
		{"duplicates", sum.Duplicates},
	}
}
