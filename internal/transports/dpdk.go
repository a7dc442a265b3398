//go:build dpdk

package transports

import (
	"github.com/metaroce/metaroce/engine/dpdkengine"
	"github.com/metaroce/metaroce/profile"
)

// EngineConfig converts the profile's dpdk section (ports[from:to]) into
// the DPDK engine's configuration, with its defaults applied. The UDP
// port left 0 and the udp_checksum left empty follow transport t.
func EngineConfig(d profile.DPDK, from, to int, t profile.Transport) dpdkengine.Config {
	c := dpdkengine.Config{EAL: append([]string(nil), d.EAL...), UDPPort: uint16(d.UDPPort), Checksum: d.Checksum, UDPChecksum: d.UDPChecksum,
		Impair:   dpdkengine.Impairment{Loss: d.Impair.Loss, Reorder: d.Impair.Reorder, Seed: uint64(d.Impair.Seed)},
		PoolSize: d.PoolSize, DataRoom: d.DataRoom, Burst: d.Burst, AckFlush: d.AckFlush, Coalesce: d.Coalesce, RxDesc: d.RxDesc, TxDesc: d.TxDesc,
		IdleSpin: d.IdleSpin, MaxIdleSleep: d.MaxIdleSleep, IdlePoll: d.IdlePoll,
		ZeroCopyMin: d.ZeroCopyMin, ZeroCopySlots: d.ZeroCopySlots}
	k, known := Kinds[t]
	if c.UDPPort == 0 {
		c.UDPPort = UDPPortFor(t)
	}
	if c.UDPChecksum == "" && c.Checksum != "none" && known {
		c.UDPChecksum = k.UDPChecksum
	}
	for _, p := range d.Ports[from:to] {
		c.Ports = append(c.Ports, dpdkengine.PortConfig{Name: p.Name, IP: p.IP, Gateway: p.Gateway, Queues: p.Queues})
	}
	for _, n := range d.Neighbours {
		c.Neighbours = append(c.Neighbours, dpdkengine.Neighbour{Peer: uint32(n.Peer), IP: n.IP, MAC: n.MAC})
	}
	return c.Defaults()
}
