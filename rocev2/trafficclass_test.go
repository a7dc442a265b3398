package rocev2

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTrafficClass(t *testing.T) {
	d, e := TrafficClass([]byte{byte(OpCNP), 0})
	require.Equal(t, uint8(48), d)
	require.Equal(t, uint8(ECNNotECT), e)
	d, e = TrafficClass([]byte{byte(OpWriteFirst)})
	require.Equal(t, uint8(26), d)
	require.Equal(t, uint8(2), e)
	d, e = TrafficClass(nil)
	require.Equal(t, uint8(DSCPData), d)
	require.Equal(t, uint8(ECNECT0), e)
}

func TestMaxPacketLenFitsCM(t *testing.T) {
	e, err := NewEndpoint(Config{MTU: 256})
	require.NoError(t, err)
	require.GreaterOrEqual(t, e.MaxPacketLen(), CMPacketLen)
	e, err = NewEndpoint(Config{})
	require.NoError(t, err)
	require.Equal(t, BTHLen+RETHLen+ImmLen+4096+ICRCLen, e.MaxPacketLen())
}
