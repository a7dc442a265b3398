//go:build dpdk

package dpdkengine

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig(strings.NewReader(`
eal: [-l, "0", --no-huge, --vdev, "net_memif0,role=server"]
ports:
  - {name: net_memif0, ip: 10.0.0.1, queues: 2}
neighbours:
  - {peer: 1, ip: 10.0.0.2, mac: "02:00:00:00:00:02"}
checksum: software
impair: {loss: 0.01, reorder: 0.02, seed: 3}
max_idle_sleep: 50us
`))
	require.NoError(t, err)
	require.Equal(t, []string{"-l", "0", "--no-huge", "--vdev", "net_memif0,role=server"}, c.EAL)
	require.Equal(t, 2, c.Ports[0].Queues)
	require.Equal(t, uint16(4794), c.UDPPort)
	require.Equal(t, 50*time.Microsecond, c.MaxIdleSleep)
	require.Equal(t, 0.02, c.Impair.Reorder)

	_, err = LoadConfig(strings.NewReader("ports: [{name: a, ip: 10.0.0.1}]\nburts: 3\n"))
	require.ErrorContains(t, err, "burts")
	_, err = LoadConfig(strings.NewReader("ports: [{name: a, ip: 10.0.0.1, qeues: 1}]\n"))
	require.ErrorContains(t, err, "qeues")
}

// The example profile in configs/ stays loadable.
func TestExampleProfile(t *testing.T) {
	f, err := os.Open("../../configs/dpdk/memif-a.yaml")
	require.NoError(t, err)
	defer f.Close()
	c, err := LoadConfig(f)
	require.NoError(t, err)
	require.Equal(t, "net_memif0", c.Ports[0].Name)
	require.Equal(t, "10.0.0.1/24", c.Ports[0].IP)
	require.Equal(t, time.Millisecond, c.IdleSpin)
	require.Contains(t, c.EAL, "--in-memory")
}

func TestValidateNamesKeys(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Ports = nil }, "ports"},
		{func(c *Config) { c.Ports[0].IP = "fe80::1" }, "ports[0].ip"},
		{func(c *Config) { c.Ports[0].Name = "" }, "ports[0].name"},
		{func(c *Config) { c.Ports = append(c.Ports, c.Ports[0]) }, "ports[1].name"},
		{func(c *Config) { c.Ports[0].Queues = 100 }, "ports[0].queues"},
		{func(c *Config) { c.Neighbours = []Neighbour{{Peer: 1, IP: "x"}} }, "neighbours[0].ip"},
		{func(c *Config) { c.Neighbours = []Neighbour{{Peer: 1, IP: "1.2.3.4", MAC: "zz"}} }, "neighbours[0].mac"},
		{func(c *Config) {
			c.Neighbours = []Neighbour{{Peer: 1, IP: "1.2.3.4"}, {Peer: 1, IP: "1.2.3.5"}}
		}, "neighbours[1].peer"},
		{func(c *Config) { c.Neighbours = []Neighbour{{Peer: maxPeers, IP: "1.2.3.4"}} }, "neighbours[0].peer"},
		{func(c *Config) { c.Checksum = "hw" }, "checksum"},
		{func(c *Config) { c.UDPChecksum = "off" }, "udp_checksum"},
		{func(c *Config) { c.Checksum, c.UDPChecksum = "none", "compute" }, "udp_checksum"},
		{func(c *Config) { c.Ports[0].IP = "10.0.0.1/33" }, "ports[0].ip"},
		{func(c *Config) { c.Ports[0].IP, c.Ports[0].Gateway = "10.0.0.1/24", "10.0.1.1" }, "ports[0].gateway"},
		{func(c *Config) { c.Ports[0].Gateway = "nope" }, "ports[0].gateway"},
		{func(c *Config) { c.Impair.Loss = 1 }, "impair.loss"},
		{func(c *Config) { c.Impair.Reorder = -0.1 }, "impair.reorder"},
		{func(c *Config) { c.PoolSize = 10 }, "pool_size"},
		{func(c *Config) { c.DataRoom = 100 }, "data_room"},
		{func(c *Config) { c.Burst = 1000 }, "burst"},
		{func(c *Config) { c.AckFlush = -2 }, "ack_flush"},
		{func(c *Config) { c.MaxIdleSleep = time.Hour }, "max_idle_sleep"},
	} {
		c := Config{Ports: []PortConfig{{Name: "p", IP: "10.0.0.1"}}}.Defaults()
		tc.mut(&c)
		require.ErrorContains(t, c.Validate(), tc.want)
	}
	require.NoError(t, Config{Ports: []PortConfig{{Name: "p", IP: "10.0.0.1"}}}.Defaults().Validate())
}

// udp_checksum defaults to compute; the older checksum: none means zero.
func TestUDPChecksumDefaults(t *testing.T) {
	ports := []PortConfig{{Name: "p", IP: "10.0.0.1"}}
	for _, tc := range []struct{ checksum, udp, want string }{
		{"", "", "compute"}, {"auto", "zero", "zero"}, {"none", "", "zero"}, {"software", "", "compute"},
	} {
		c := Config{Ports: ports, Checksum: tc.checksum, UDPChecksum: tc.udp}.Defaults()
		require.NoError(t, c.Validate())
		require.Equal(t, tc.want, c.UDPChecksum, "%+v", tc)
	}
}

func TestSubnets(t *testing.T) {
	ip, bits, err := parseCIDR("10.1.0.2/24")
	require.NoError(t, err)
	require.Equal(t, IPv4{10, 1, 0, 2}, ip)
	require.Equal(t, 24, bits)
	require.True(t, sameSubnet(ip, IPv4{10, 1, 0, 1}, 24))
	require.False(t, sameSubnet(ip, IPv4{10, 2, 0, 2}, 24))
	require.True(t, sameSubnet(ip, IPv4{1, 2, 3, 4}, 0))
	_, bits, err = parseCIDR("10.1.0.2")
	require.NoError(t, err)
	require.Equal(t, 32, bits)
	p := &port{ip: ip, bits: 24, gw: 7}
	require.Equal(t, verbs.PeerHandle(3), p.nextHop(3, IPv4{10, 1, 0, 9}))
	require.Equal(t, verbs.PeerHandle(7), p.nextHop(3, IPv4{10, 2, 0, 9}))
	p.gw = noGateway
	require.Equal(t, verbs.PeerHandle(3), p.nextHop(3, IPv4{10, 2, 0, 9}))
}

func TestSplitArgs(t *testing.T) {
	eal, app := SplitArgs([]string{"-l", "0-1", "--vdev", "net_null0", "--", "write_bw", "-s", "1024"})
	require.Equal(t, []string{"-l", "0-1", "--vdev", "net_null0"}, eal)
	require.Equal(t, []string{"write_bw", "-s", "1024"}, app)
	eal, app = SplitArgs([]string{"write_bw"})
	require.Nil(t, eal)
	require.Equal(t, []string{"write_bw"}, app)
}

func TestStartRejectsUnknownPort(t *testing.T) {
	_, err := Start(Config{Ports: []PortConfig{{Name: "net_nothere0", IP: "10.0.0.1"}}, PoolSize: 1023}, nil)
	require.ErrorContains(t, err, "net_nothere0")
}
