package verbstest

import (
	"testing"

	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// Fixture helpers every transport's tests use, here and in the cores'
// own tests.

// Region registers n bytes in pd with access, byte i set to fill(i).
func Region(t testing.TB, pd *verbs.ProtectionDomain, n int, fill func(i int) byte, access verbs.Access) (*verbs.MemoryRegion, []byte) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = fill(i)
	}
	m, err := pd.RegisterMR(b, access)
	require.NoError(t, err)
	return m, b
}

// EE fills a region with 0xEE: memory no transfer has touched.
func EE(int) byte { return 0xEE }

// WaitOne runs p until cq yields one completion, for at most within of
// virtual time, and returns it.
func WaitOne(t testing.TB, p *mempair.Pair, cq *verbs.CompletionQueue, within verbs.Time) verbs.WorkCompletion {
	t.Helper()
	var wc [1]verbs.WorkCompletion
	require.NoError(t, p.RunUntil(func() bool { return cq.Poll(wc[:]) == 1 }, p.Now+within))
	return wc[0]
}
