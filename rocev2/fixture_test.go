package rocev2_test

import (
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	"github.com/metaroce/metaroce/internal/verbstest"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// pair builds two endpoints joined by a memlink: A (handle 0, 10.0.0.1)
// and B (handle 1, 10.0.0.2, accepting connections).
func pair(t testing.TB, a, b rocev2.Config, link memlink.Config) (*mempair.Pair, *rocev2.Endpoint, *rocev2.Endpoint) {
	t.Helper()
	a.LocalIP = rocev2.DefaultPeerIP(0)
	b.LocalIP = rocev2.DefaultPeerIP(1)
	b.AcceptIncoming = true
	ea, err := rocev2.NewEndpoint(a)
	require.NoError(t, err)
	eb, err := rocev2.NewEndpoint(b)
	require.NoError(t, err)
	return mempair.NewTransports(ea, eb, link), ea, eb
}

// connect opens a QP from A to B and runs until both ends are established.
func connect(t testing.TB, p *mempair.Pair, ea, eb *rocev2.Endpoint) (ca, cb *rocev2.Conn) {
	t.Helper()
	ca, err := ea.Connect(p.Now, 1)
	require.NoError(t, err)
	require.NoError(t, p.RunUntil(func() bool {
		if cb == nil {
			cb, _ = eb.Accept()
		}
		return cb != nil && ca.Established()
	}, p.Now+1e9))
	return ca, cb
}

// fixture is one established QP A->B with PD, CQs and a 64 KiB source at A.
type fixture struct {
	p        *mempair.Pair
	ea, eb   *rocev2.Endpoint
	ca, cb   *rocev2.Conn
	pa, pb   *verbs.ProtectionDomain
	cqa, cqb *verbs.CompletionQueue
	qa, qb   *rocev2.QueuePair
	src      *verbs.MemoryRegion
}

func newFixture(t testing.TB, cfg rocev2.Config, link memlink.Config) *fixture {
	t.Helper()
	if link.Delay == 0 {
		link.Delay = 2000
	}
	f := &fixture{}
	f.p, f.ea, f.eb = pair(t, cfg, cfg, link)
	f.ca, f.cb = connect(t, f.p, f.ea, f.eb)
	f.pa, f.pb = f.ea.AllocPD(), f.eb.AllocPD()
	f.cqa, f.cqb = verbs.NewCompletionQueue(16), verbs.NewCompletionQueue(16)
	var err error
	f.qa, err = f.ca.CreateQP(verbs.QPAttr{PD: f.pa, SendCQ: f.cqa, RecvCQ: f.cqa})
	require.NoError(t, err)
	f.qb, err = f.cb.CreateQP(verbs.QPAttr{PD: f.pb, SendCQ: f.cqb, RecvCQ: f.cqb})
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*13 + 1)
	}
	f.src, err = f.pa.RegisterMR(buf, verbs.AccessLocalWrite)
	require.NoError(t, err)
	return f
}

// region registers n bytes filled with 0xEE at side pd.
func region(t testing.TB, pd *verbs.ProtectionDomain, n int, access verbs.Access) (*verbs.MemoryRegion, []byte) {
	t.Helper()
	return verbstest.Region(t, pd, n, verbstest.EE, access)
}

// wait runs until cq yields one completion and returns it.
func (f *fixture) wait(t testing.TB, cq *verbs.CompletionQueue) verbs.WorkCompletion {
	t.Helper()
	return verbstest.WaitOne(t, f.p, cq, 60e9)
}

func (f *fixture) post(t testing.TB, wr verbs.SendWR) {
	t.Helper()
	require.NoError(t, f.qa.PostSend(f.p.Now, wr))
}
