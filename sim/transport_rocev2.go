package sim

import (
	"encoding/binary"
	"reflect"

	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// This file is the RoCEv2 baseline's part of the simulator: its
// parameters and how to build a host's device; the generic adapter
// (transport_verbs.go) does the rest. One rocev2.Endpoint per host carries
// all of the host's RC queue pairs; each connection is one QP at each end
// (RoCEv2 has no multiplexing).
//
// Planes: a RoCEv2 QP is bound to one NIC port and keeps one UDP source
// port, so it uses one plane for its whole life. On a multi-plane fabric
// the adapter binds connection i (in Dial order) to plane i mod planes, as
// applications spread QPs over a multi-port NIC's ports: the k-th
// connection between a pair of hosts uses plane k mod planes. The rocev2 core
// does not choose planes (its TxMeta.Plane is always 0), so the adapter
// sets it on the way out, looking the plane up by the BTH's destination
// QP and the peer. The rocev2 endpoint paces everything it sends as one
// port at LineRateBps, so the adapter gives it the sum of the host's ports
// (planes × port rate) and caps each QP's DCQCN rate at one port's rate:
// the simulated NIC ports then hold each plane to its own rate.

// RoCEv2Params is the transport.rocev2 section of an experiment file: the
// core's own Config, whose `key` tags name the keys (the same names as a
// profile's rocev2 section: ack_timeout_code, retry_count,
// dcqcn.disable, dcqcn.cnp_interval, ...; docs/config-keys.md lists
// them). Zero values take rocev2.Config's defaults (perftest/ConnectX
// values), except mtu, which defaults to transport.mtu. The fields without
// a key tag (addresses, line rate, DCQCN's rate cap, queue depths) are the
// adapter's to set.
type RoCEv2Params struct {
	rocev2.Config `key:",inline"`
}

// core is the endpoint configuration of host h for these parameters on
// hosts with planes NIC ports of nicGbps each.
func (p *RoCEv2Params) core(h, planes, mtu int, nicGbps float64) rocev2.Config {
	cfg := p.Config
	cfg.LocalIP, cfg.PeerIP, cfg.AcceptIncoming = rocev2IP(verbs.PeerHandle(h)), rocev2IP, true
	if cfg.MTU == 0 {
		cfg.MTU = mtu
	}
	cfg.LineRateBps = float64(planes) * nicGbps * 1e9
	cfg.DCQCN.MaxRateBps = nicGbps * 1e9
	return cfg
}

// CheckParams implements paramsChecker: the core judges the parameters
// when the file is loaded, and the error names the key.
func (rocev2Transport) CheckParams(c *Config, params any) error {
	cfg := params.(*RoCEv2Params).core(0, c.Topology.Planes, c.Transport.MTU, c.Topology.NICGbps)
	return coreParamsError("rocev2", reflect.TypeOf(rocev2.Config{}), cfg.Defaults().Validate())
}

type rocev2Transport struct{}

func (rocev2Transport) Name() string    { return "rocev2" }
func (rocev2Transport) UDPPort() uint16 { return rocev2.UDPPort }
func (rocev2Transport) NewParams() any  { return &RoCEv2Params{} }

func (rocev2Transport) PacketLens(mtu int) (int, int) {
	return rocev2.BTHLen + rocev2.RETHLen + mtu + rocev2.ICRCLen, rocev2.BTHLen + 4 + rocev2.ICRCLen
}

func rocev2IP(h verbs.PeerHandle) rocev2.IPv4 {
	ip := hostIP(int32(h), 0)
	return rocev2.IPv4{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}
}

func (rocev2Transport) NewWorld(env WorldEnv, params any) (World, error) {
	p := params.(*RoCEv2Params)
	return newVerbsWorld(env, deviceSpec{name: "rocev2",
		newDevice: func(h int) (verbs.Device, error) {
			cfg := p.core(h, env.Planes, env.MTU, env.NICGbps)
			ep, err := rocev2.NewEndpoint(cfg)
			if err != nil {
				return nil, err
			}
			return &rcDevice{Device: ep.Device(), plane: map[rcKey]uint8{}}, nil
		},
		placed: func(s verbs.Session) uint64 {
			var d uint64
			for _, c := range s.(*rocev2.Session).Conns {
				d += c.Counters().PayloadPlaced
			}
			return d
		},
		counters: rocev2Counters,
	})
}

// rcKey names a QP's traffic as the sender sees it: the peer and the
// peer's QP number (the BTH's DestQP).
type rcKey struct {
	peer verbs.PeerHandle
	qpn  uint32
}

// rcDevice is a host's device with the plane of each QP filled in.
type rcDevice struct {
	verbs.Device
	plane map[rcKey]uint8 // the plane of every QP that has one other than 0
}

func (d *rcDevice) bindPlane(peer verbs.PeerHandle, qpn verbs.QPN, plane uint8) {
	d.plane[rcKey{peer, uint32(qpn)}] = plane
}

func (d *rcDevice) NextPacket(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	m, ok := d.Device.NextPacket(now, buf)
	if ok && len(d.plane) > 0 && m.Len >= rocev2.BTHLen {
		qpn := binary.BigEndian.Uint32(buf[4:8]) & 0xffffff
		m.Plane = verbs.PlaneID(d.plane[rcKey{m.Peer, qpn}])
	}
	return m, ok
}

// rocev2Counters sums the connections' counters.
func rocev2Counters(ss []verbs.Session) []Field {
	var s rocev2.ConnCounters
	for _, sess := range ss {
		if sess == nil {
			continue
		}
		for _, c := range sess.(*rocev2.Session).Conns {
			k := c.Counters()
			s.DataPacketsSent += k.DataPacketsSent
			s.DataResent += k.DataResent
			s.Retries += k.Retries
			s.Timeouts += k.Timeouts
			s.NaksSent += k.NaksSent
			s.OutOfSequence += k.OutOfSequence
			s.AcksSent += k.AcksSent
			s.CNPsSent += k.CNPsSent
			s.RateCuts += k.RateCuts
			s.RNRNaksSent += k.RNRNaksSent
			s.Duplicates += k.Duplicates
		}
	}
	return []Field{
		{"data_packets", s.DataPacketsSent}, {"data_resent", s.DataResent},
		{"retransmits", s.DataResent}, {"go_back_n", s.Retries}, {"rto_resends", s.Timeouts},
		{"seq_naks", s.NaksSent}, {"out_of_sequence", s.OutOfSequence},
		{"acks", s.AcksSent}, {"cnps", s.CNPsSent}, {"rate_cuts", s.RateCuts},
		{"rnr_naks", s.RNRNaksSent}, {"duplicates", s.Duplicates},
	}
}
