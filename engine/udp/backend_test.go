package udp

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// loopbackPair picks two unused-looking loopback addresses (tests run in
// parallel with other packages, so each test takes its own 127.x.y.0/24)
// and returns them with port 0 (the kernel picks the receive ports).
func loopbackPair(t testing.TB) (netip.AddrPort, netip.AddrPort) {
	t.Helper()
	x, y := byte(1+rand.IntN(250)), byte(1+rand.IntN(250))
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, x, y, 1}), 0),
		netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, x, y, 2}), 0)
}

type pair struct {
	b [2]*Backend
}

func newPair(t testing.TB, ca, cb Config) *pair {
	t.Helper()
	a, b := loopbackPair(t)
	ca.Addr, cb.Addr = a, b
	p := &pair{}
	var err error
	if p.b[0], err = New(ca); err != nil {
		t.Fatal(err)
	}
	if p.b[1], err = New(cb); err != nil {
		p.b[0].Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b[0].Close(); p.b[1].Close() })
	if _, err := p.b[0].AddPeer(p.b[1].LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b[1].AddPeer(p.b[0].LocalAddr()); err != nil {
		t.Fatal(err)
	}
	return p
}

// run steps both backends (in this goroutine: each transport has one
// owner) until cond holds or limit passes.
func (p *pair) run(t testing.TB, limit time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("condition not reached within %v", limit)
		}
		for _, b := range p.b {
			if _, err := b.Step(0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Over real sockets the endpoints draw ids and incarnations as the CLI
// does (engine.SecureRandom).
func metaroceEndpoints(t testing.TB, p *pair, paths int) (*mr.Endpoint, *mr.Endpoint) {
	t.Helper()
	return metaroceEndpointsWith(t, p, mr.Config{Paths: paths})
}

// metaroceEndpointsWith is metaroceEndpoints with more of the endpoints'
// configuration (Paths and any other field set in base; Node, MTU,
// AcceptIncoming and Rand are set here).
func metaroceEndpointsWith(t testing.TB, p *pair, base mr.Config) (*mr.Endpoint, *mr.Endpoint) {
	t.Helper()
	ca, cb := base, base
	ca.Node, ca.MTU, ca.Rand = 1, 1024, engine.SecureRandom()
	cb.Node, cb.MTU, cb.Rand, cb.AcceptIncoming = 2, 1024, engine.SecureRandom(), true
	ea, err := mr.NewEndpoint(ca)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := mr.NewEndpoint(cb)
	if err != nil {
		t.Fatal(err)
	}
	p.b[0].Attach(ea)
	p.b[1].Attach(eb)
	return ea, eb
}

// connectMetaroce connects A's endpoint to B's over p and runs both
// backends until A's connection is established and B has accepted it.
func connectMetaroce(tb testing.TB, p *pair, ea, eb *mr.Endpoint) (ca, cb *mr.Conn) {
	tb.Helper()
	ca, err := ea.Connect(p.b[0].Now(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	p.run(tb, 5*time.Second, func() bool {
		if cb == nil {
			cb, _ = eb.Accept()
		}
		return cb != nil && ca.Established()
	})
	return ca, cb
}

// writeAndVerify moves n bytes from A to B with one WRITE per 64 KiB and
// checks them.
func writeAndVerify(t *testing.T, p *pair, ea, eb *mr.Endpoint, n int) {
	ca, cb := connectMetaroce(t, p, ea, eb)
	cq := verbs.NewCompletionQueue(64)
	pd := ea.AllocPD()
	qa, err := ca.CreateQP(0, verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, n)
	ms, err := pd.RegisterMR(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pdb := eb.AllocPD()
	md, err := pdb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cqb := verbs.NewCompletionQueue(64)
	if _, err := cb.CreateQP(0, verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
		t.Fatal(err)
	}
	const msg = 64 << 10
	for off := 0; off < n; off += msg {
		if err := qa.PostSend(p.b[0].Now(), verbs.SendWR{ID: uint64(off), Opcode: verbs.WRWrite, Local: ms.SGE(off, msg),
			RemoteAddr: md.Addr() + uint64(off), RKey: md.RKey()}); err != nil {
			t.Fatal(err)
		}
	}
	wcs := make([]verbs.WorkCompletion, 16)
	done := 0
	p.run(t, 20*time.Second, func() bool {
		k := cq.Poll(wcs)
		for _, wc := range wcs[:k] {
			if wc.Status != verbs.StatusSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		done += k
		return done == n/msg
	})
	if !bytes.Equal(src, dst) {
		t.Fatal("data differs")
	}
}

func TestMetaroceWriteOverLoopback(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	ea, eb := metaroceEndpoints(t, p, 4)
	var mu sync.Mutex
	ports := map[uint16]bool{}
	p.b[0].SetCapture(func(_ int64, pk engine.Packet) {
		mu.Lock()
		ports[pk.SrcPort] = true
		mu.Unlock()
		if pk.ECN != 2 {
			t.Errorf("sent with ECN %d, want ECT(0)", pk.ECN)
		}
	})
	writeAndVerify(t, p, ea, eb, 4<<20)
	// Four paths: four data source ports (and nothing else: control
	// packets use path 0's port).
	if len(ports) != 4 {
		t.Fatalf("A sent from %d source ports %v, want 4", len(ports), ports)
	}
	for e := verbs.Entropy(49152); e < 49156; e++ {
		if sp := p.b[0].SourcePort(e); sp == 0 || !ports[sp] {
			t.Errorf("entropy %d: source port %d not seen on the wire", e, sp)
		}
	}
	st := p.b[1].Stats()
	if st.RxPackets == 0 || st.RxUnknownPeer != 0 || st.RxTruncated != 0 {
		t.Fatalf("B stats: rx %d unknown %d truncated %d", st.RxPackets, st.RxUnknownPeer, st.RxTruncated)
	}
}

func TestInjectedLossIsRepaired(t *testing.T) {
	p := newPair(t, Config{Loss: 0.02, Seed: 1}, Config{Loss: 0.02, Seed: 2})
	ea, eb := metaroceEndpoints(t, p, 8)
	writeAndVerify(t, p, ea, eb, 2<<20)
	drops := p.b[0].Stats().RxInjectedDrops + p.b[1].Stats().RxInjectedDrops
	if drops == 0 {
		t.Fatal("2% injected loss dropped nothing")
	}
	t.Logf("injected drops: %d of %d packets received", drops, p.b[0].Stats().RxPackets+p.b[1].Stats().RxPackets)
}

// TestECNCongestionExperienced sends a CE-marked datagram from an
// ordinary socket and checks the backend hands CE to the transport.
func TestECNCongestionExperienced(t *testing.T) {
	a, _ := loopbackPair(t)
	b, err := New(Config{Addr: a})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := &recorder{}
	b.Attach(rec)
	srcAddr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, a.Addr().As4()[1], a.Addr().As4()[2], 9}), 0)
	src, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(srcAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := b.AddPeer(netip.AddrPortFrom(srcAddr.Addr(), 1)); err != nil {
		t.Fatal(err)
	}
	raw, _ := src.SyscallConn()
	for i, tos := range []int{0, 2, 3} {
		_ = raw.Control(func(fd uintptr) { setTOS(t, fd, tos) })
		if _, err := src.WriteToUDPAddrPort([]byte{byte(i)}, b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now().Add(5 * time.Second)
	for len(rec.got) < 3 && time.Now().Before(end) {
		if _, err := b.Step(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.got) != 3 {
		t.Fatalf("received %d of 3", len(rec.got))
	}
	for i, want := range []bool{false, false, true} {
		if rec.got[i].CE != want {
			t.Errorf("datagram %d: CE %v, want %v", i, rec.got[i].CE, want)
		}
	}
	if b.Stats().RxCE != 1 {
		t.Errorf("RxCE = %d, want 1", b.Stats().RxCE)
	}
}

func TestUnknownPeerCounted(t *testing.T) {
	a, _ := loopbackPair(t)
	b, err := New(Config{Addr: a})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := &recorder{}
	b.Attach(rec)
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("who")); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(5 * time.Second)
	for b.Stats().RxUnknownPeer == 0 && time.Now().Before(end) {
		if _, err := b.Step(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if b.Stats().RxUnknownPeer != 1 || len(rec.got) != 0 {
		t.Fatalf("unknown %d, delivered %d", b.Stats().RxUnknownPeer, len(rec.got))
	}
}

func TestRoCEv2OverLoopback(t *testing.T) {
	p := newPair(t, Config{}, Config{})
	mk := func(i int, accept bool) *rocev2.Endpoint {
		b := p.b[i]
		ep, err := rocev2.NewEndpoint(rocev2.Config{LocalIP: b.LocalIP(),
			PeerIP: func(h verbs.PeerHandle) rocev2.IPv4 { return b.PeerIP(h) }, MTU: 1024, AcceptIncoming: accept})
		if err != nil {
			t.Fatal(err)
		}
		b.Attach(ep)
		return ep
	}
	ea, eb := mk(0, false), mk(1, true)
	c, err := ea.Connect(p.b[0].Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var cb *rocev2.Conn
	p.run(t, 5*time.Second, func() bool {
		if cb == nil {
			cb, _ = eb.Accept()
		}
		return cb != nil && c.Established()
	})
	cq := verbs.NewCompletionQueue(64)
	pd := ea.AllocPD()
	qp, err := c.CreateQP(verbs.QPAttr{PD: pd, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	src := bytes.Repeat([]byte("rocev2!!"), n/8)
	dst := make([]byte, n)
	ms, _ := pd.RegisterMR(src, 0)
	pdb := eb.AllocPD()
	md, err := pdb.RegisterMR(dst, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cqb := verbs.NewCompletionQueue(64)
	if _, err := cb.CreateQP(verbs.QPAttr{PD: pdb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(p.b[0].Now(), verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: ms.SGE(0, n),
		RemoteAddr: md.Addr(), RKey: verbs.RKey(md.RKey())}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbs.WorkCompletion, 4)
	p.run(t, 20*time.Second, func() bool {
		k := cq.Poll(wcs)
		if k > 0 && wcs[0].Status != verbs.StatusSuccess {
			t.Fatalf("completion %+v", wcs[0])
		}
		return k > 0
	})
	if !bytes.Equal(src, dst) {
		t.Fatal("data differs")
	}
}

// recorder is a transport that only records what arrives.
type recorder struct{ got []verbs.RxMeta }

func (r *recorder) Receive(_ verbs.Time, _ []byte, rx verbs.RxMeta)    { r.got = append(r.got, rx) }
func (r *recorder) NextPacket(verbs.Time, []byte) (verbs.TxMeta, bool) { return verbs.TxMeta{}, false }
func (r *recorder) NextDeadline() verbs.Time                           { return verbs.Never }
func (r *recorder) OnTimer(verbs.Time)                                 {}
func (r *recorder) MaxPacketLen() int                                  { return 2048 }

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{Addr: netip.MustParseAddrPort("[::1]:0")},
		{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Loss: 1.5},
		{Addr: netip.MustParseAddrPort("127.0.0.1:0"), DSCP: 64},
		{Addr: netip.MustParseAddrPort("127.0.0.1:0"), IdleWait: -time.Millisecond},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
