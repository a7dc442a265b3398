//go:build dpdk

package dpdkengine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
)

func TestMemifBufSize(t *testing.T) {
	for args, want := range map[string]int{
		"":                               2048,
		"role=server,id=0,socket=/x":     2048,
		"role=client,bsize=9216,id=0":    9216,
		"bsize=4352":                     4352,
		"role=client,id=0,socket=/bsize": 2048,
	} {
		n, err := memifBufSize(args)
		require.NoError(t, err, args)
		require.Equal(t, want, n, args)
	}
	for _, args := range []string{"bsize=", "bsize=x", "bsize=0", "bsize=70000"} {
		_, err := memifBufSize(args)
		require.ErrorContains(t, err, "bsize", args)
	}
}

func TestMemifEAL(t *testing.T) {
	eal := []string{"--no-huge", "--vdev", "net_memif0,role=server,socket=/s", "--vdev=net_memif1,role=client,socket=/s",
		"--vdev", "net_memif2,bsize=1024", "--vdev", "net_ring0", "-a", "0000:3b:00.0", "--vdev"}
	orig := append([]string(nil), eal...)
	// The default data room fits memif's default buffers: nothing changes.
	out, raised := memifEAL(eal, Config{}.Defaults().DataRoom)
	require.Equal(t, orig, out)
	require.Empty(t, raised)
	out, raised = memifEAL(eal, 4480)
	require.Equal(t, []string{"--no-huge", "--vdev", "net_memif0,role=server,socket=/s,bsize=4352", "--vdev=net_memif1,role=client,socket=/s,bsize=4352",
		"--vdev", "net_memif2,bsize=1024", "--vdev", "net_ring0", "-a", "0000:3b:00.0", "--vdev"}, out)
	require.Equal(t, []string{"net_memif0", "net_memif1"}, raised)
	require.Equal(t, orig, eal, "the caller's arguments are not changed")
}

// TestMemifRefusesSmallBuffers: a memif port whose buffers (memif's
// default 2 KiB here) are smaller than an mbuf's data is refused before
// it is configured, with an error that names the keys to change (DPDK
// 22.11's memif corrupts frames that take several of its buffers:
// dpdk.TestMemifMultiBuffer). The refused port is left as it was.
func TestMemifRefusesSmallBuffers(t *testing.T) {
	var name string
	for _, p := range dpdk.Ports() {
		n := p.Name()
		if strings.HasPrefix(n, "net_memif") && !strings.Contains(p.DevArgs(), "bsize=") {
			name = n
			break
		}
	}
	require.NotEmpty(t, name, "no memif port with the default bsize left")
	e, err := Start(Config{Ports: []PortConfig{{Name: name, IP: "10.0.0.1"}}, PoolSize: 1023, DataRoom: 4096 + 128}, nil)
	if err == nil {
		e.Close()
	}
	require.Error(t, err)
	t.Log(err)
	for _, want := range []string{name, "bsize=4096", "eal", "data_room"} {
		require.ErrorContains(t, err, want)
	}
	// The default data room fits memif's default buffers; the benchmark
	// pair's 9 KiB buffers hold its 9 KiB of data.
	id, err := dpdk.PortByName(name)
	require.NoError(t, err)
	require.NoError(t, checkMemifBuf(name, id.DevArgs(), Config{}.Defaults().DataRoom))
	bench := fmt.Sprintf("net_memif%d", 2*zcBenchPair)
	if id, err := dpdk.PortByName(bench); err == nil {
		require.NoError(t, checkMemifBuf(bench, id.DevArgs(), 9216+128))
		require.Error(t, checkMemifBuf(bench, id.DevArgs(), 9216+129))
	}
}
