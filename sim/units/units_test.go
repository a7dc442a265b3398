package units

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]Duration{
		"2ms": Duration(2 * time.Millisecond), "1.5us": 1500, "200": 200, "never": NeverDuration,
	} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := parseDuration("2 parsecs")
	require.ErrorContains(t, err, "bad duration")
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{
		"4096": 4096, "64KiB": 64 << 10, "1MiB": 1 << 20, "1MB": 1e6, "1.5KiB": 1536, "100B": 100,
	} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := parseSize("-1")
	require.Error(t, err)
	require.Equal(t, "64KiB", Size(64<<10).String())
}
