package mempair

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

func TestConnectAndDeterminism(t *testing.T) {
	run := func() (uint64, verbs.Time, memlink.Stats) {
		p, err := New(metaroce.Config{}, metaroce.Config{}, memlink.Config{Seed: 5, Delay: 1000, Loss: 0.3})
		require.NoError(t, err)
		ca, cb, err := p.Connect(1e9)
		require.NoError(t, err)
		require.True(t, ca.Established())
		require.True(t, cb.Established())
		return p.Steps(), p.Now, p.Link.Stats()
	}
	s1, t1, l1 := run()
	s2, t2, l2 := run()
	require.Equal(t, s1, s2)
	require.Equal(t, t1, t2)
	require.Equal(t, l1, l2)
}

func TestRunUntilReportsStallAndLimit(t *testing.T) {
	p, err := New(metaroce.Config{}, metaroce.Config{}, memlink.Config{Seed: 1})
	require.NoError(t, err)
	require.ErrorIs(t, p.RunUntil(func() bool { return false }, 1e9), ErrStalled)

	_, err = p.EP[0].Connect(p.Now, 1)
	require.NoError(t, err)
	require.ErrorContains(t, p.RunUntil(func() bool { return false }, p.Now+1000), "not reached")
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(metaroce.Config{Paths: 300}, metaroce.Config{}, memlink.Config{})
	require.ErrorContains(t, err, "Paths")
}
