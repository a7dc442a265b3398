package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// TestMaxQPsBoundsTheTable: the REQ past B's MaxQPs is rejected (that
// Connect of A fails as refused) and B's table stays at MaxQPs; the QPs B
// accepted are still taken by Accept, and a QP that died in the accept
// queue is not handed out.
func TestMaxQPsBoundsTheTable(t *testing.T) {
	p, ea, eb := pair(t, rocev2.Config{}, rocev2.Config{MaxQPs: 2}, memlink.Config{Delay: 2000})
	var cs []*rocev2.Conn
	for i := 0; i < 3; i++ {
		c, err := ea.Connect(p.Now, 1)
		require.NoError(t, err)
		cs = append(cs, c)
	}
	count := func() (up, refused int) {
		for _, c := range cs {
			if c.Established() {
				up++
			} else if c.State() == "closed" && c.FailReason() == verbs.FailRefused {
				refused++
			}
		}
		return up, refused
	}
	require.NoError(t, p.RunUntil(func() bool { up, refused := count(); return up == 2 && refused == 1 }, p.Now+1e9))
	require.Equal(t, 2, eb.Connections())
	got := 0
	for {
		c, ok := eb.Accept()
		if !ok {
			break
		}
		require.NotEqual(t, "closed", c.State())
		got++
	}
	require.Equal(t, 2, got)
}
