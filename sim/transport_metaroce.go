package sim

import (
	"fmt"
	"reflect"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
)

// This file is metaroce's part of the simulator: its experiment
// parameters and how to build a host's device from them; the generic
// adapter (transport_verbs.go) does the rest. One metaroce.Endpoint per
// host carries all of that host's connections; each connection has one
// queue pair (stream 0) at each end.

// MetaRoCEParams is the transport.metaroce section of an experiment file:
// the core's own Config, whose `key` tags name the keys (the same names as
// a profile's metaroce section; docs/config-keys.md lists them), and one
// key of the simulator's. Zero values take metaroce.Config's defaults,
// except where the fabric decides: mtu defaults to transport.mtu (on an
// Ethernet fabric with 9000-byte frames metaroce can carry 8 KiB payloads,
// where RoCEv2's IB MTU stops at 4096) and planes to topology.planes (at
// most that: a plane is a NIC port). The fields without a key tag
// (identity, link rate, queue depths) are the adapter's to set.
type MetaRoCEParams struct {
	mr.Config `key:",inline"`
	// NoRateHints leaves the receiver's link rate unknown to the endpoint,
	// so it gives no rate hints (the senders rely on ECN alone).
	NoRateHints bool `key:"no_rate_hints"`
}

// core is the endpoint configuration for these parameters on hosts with
// planes NIC ports of nicGbps each.
func (p *MetaRoCEParams) core(planes, mtu int, nicGbps float64) mr.Config {
	cfg := p.Config
	if cfg.MTU == 0 {
		cfg.MTU = mtu
	}
	if cfg.Planes == 0 {
		cfg.Planes = planes
	}
	if !p.NoRateHints {
		// The receiver knows its link: every NIC port together.
		cfg.LinkRateBps = float64(planes) * nicGbps * 1e9
	}
	return cfg
}

// CheckParams implements paramsChecker: the core judges the parameters
// when the file is loaded, and the error names the key (the core reports
// a field by its Go name, whose key its tag gives).
func (metaroceTransport) CheckParams(c *Config, params any) error {
	p := params.(*MetaRoCEParams)
	if p.Planes > c.Topology.Planes {
		return fmt.Errorf("transport.metaroce.planes = %d, want at most topology.planes = %d", p.Planes, c.Topology.Planes)
	}
	cfg := p.core(min(c.Topology.Planes, mr.MaxPlanes), c.Transport.MTU, c.Topology.NICGbps)
	return coreParamsError("metaroce", reflect.TypeOf(mr.Config{}), cfg.Defaults().Validate())
}

type metaroceTransport struct{}

func (metaroceTransport) Name() string    { return "metaroce" }
func (metaroceTransport) UDPPort() uint16 { return mr.DefaultUDPPort }
func (metaroceTransport) NewParams() any  { return &MetaRoCEParams{} }

func (metaroceTransport) PacketLens(mtu int) (int, int) {
	return mr.FullWriteLen(mtu), mr.HeaderLen + mr.AckPrefixLen + mr.AckBlockCompactLen + mr.CRCLen
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
