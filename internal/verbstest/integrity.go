package verbstest

import (
	"testing"

	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Corruption: over a link that corrupts packets, every corrupted packet is
// caught by the transport's integrity check and dropped (drops counts
// them at both ends, whatever the transport calls them), loss repair
// delivers the WRITE, and every byte arrives intact. mk's link must
// corrupt packets.
func Corruption(t *testing.T, mk Devices, drops func(p *mempair.Pair) uint64) {
	f := setup(t, mk)
	target, tb := region(t, f.pb, 256<<10, ee, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	src, sb := region(t, f.pa, 256<<10, func(i int) byte { return byte(i * 31) }, 0)
	f.post(t, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, len(sb)), RemoteAddr: target.Addr(), RKey: target.RKey()})
	require.Equal(t, verbs.StatusSuccess, f.wait(t, f.cqa).Status)
	require.Equal(t, sb, tb)
	// Packets still on the link may be corrupted too: count once it is empty.
	require.NoError(t, f.p.RunUntil(func() bool { return f.p.Link.InFlight() == 0 }, f.p.Now+1e9))
	corrupted := f.p.Link.Stats().Corrupted
	require.Positive(t, corrupted, "the link corrupted packets")
	require.Equal(t, corrupted, drops(f.p), "every corrupted packet is caught")
}
