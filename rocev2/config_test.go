package rocev2

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.Defaults()
	require.NoError(t, c.Validate())
	require.Equal(t, IPv4{10, 0, 0, 1}, c.LocalIP)
	require.Equal(t, IPv4{10, 0, 0, 2}, c.PeerIP(1))
	require.Equal(t, 4096, c.MTU)
	require.Equal(t, uint16(0xFFFF), c.PKey)
	require.Equal(t, uint8(8), c.AckTimeoutCode)
	require.Equal(t, 7, c.RetryCount)
	require.Equal(t, 7, c.RNRRetry)
	require.Equal(t, uint8(12), c.MinRNRTimer)
	require.Equal(t, 16, c.MaxRdAtomic)
	require.Equal(t, 100e9, c.LineRateBps)
	require.Equal(t, 46, c.FrameOverhead)
	require.Equal(t, time.Millisecond, c.ConnectRetry)
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for field, c := range map[string]Config{
		"MTU":             {MTU: 1500},
		"RetryCount":      {RetryCount: 300},
		"RNRRetry":        {RNRRetry: 8},
		"MinRNRTimer":     {MinRNRTimer: 32},
		"AckTimeoutCode":  {AckTimeoutCode: 32},
		"LineRateBps":     {LineRateBps: -1},
		"QPNBase":         {QPNBase: 1 << 24},
		"DCQCN.G":         {DCQCN: DCQCNConfig{G: 2}},
		"DCQCN.TimeReset": {DCQCN: DCQCNConfig{TimeReset: -time.Second}},
	} {
		_, err := NewEndpoint(c)
		require.ErrorContains(t, err, field)
	}
}
