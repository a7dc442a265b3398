//go:build dpdk

package dpdkengine

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/dpdk"
)

// TestTelemetryStats asks the EAL's real telemetry socket for
// /metaroce/stats during a transfer's aftermath and finds the counters.
func TestTelemetryStats(t *testing.T) {
	p := newMemifPair(t, 4, Impairment{}, 1, 1024)
	p.transfer(xfer{writeN: 256 << 10}, 5)
	stop, err := p.eng[1].StartTelemetry(10 * time.Millisecond)
	require.NoError(t, err)
	defer stop()
	time.Sleep(30 * time.Millisecond)

	conn, err := net.Dial("unixpacket", dpdk.TelemetrySocket())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 1<<16)
	_, err = conn.Read(buf) // greeting: version, pid, max_output_len
	require.NoError(t, err)
	_, err = conn.Write([]byte(TelemetryCommand))
	require.NoError(t, err)
	n, err := conn.Read(buf)
	require.NoError(t, err)
	var reply map[string]map[string]uint64
	require.NoError(t, json.Unmarshal(buf[:n], &reply), "%s", buf[:n])
	stats := reply[TelemetryCommand]
	require.NotNil(t, stats, "%s", buf[:n])
	c, err := p.sh[1].Counters()
	require.NoError(t, err)
	require.NotZero(t, stats["shard0_rx_frames"], "%s", buf[:n])
	require.LessOrEqual(t, stats["shard0_rx_frames"], c.RxFrames)
	require.NotZero(t, stats["port_net_memif9_ipackets"], "%v", stats)
	require.Contains(t, stats, "shard0_drop_udp_checksum")
	require.Contains(t, stats, "shard0_rx_no_udp_checksum")
	for _, ph := range []string{"rx", "core", "tx", "app"} {
		require.NotZero(t, stats["shard0_time_"+ph+"_ns"], "%s time in the split: %v", ph, stats)
	}
	require.Equal(t, "0000_3b_00_0", telName("0000:3b:00.0"))
}
