package sim

import (
	"encoding/binary"
	"testing"

	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

// probeTransport is a scripted transport for model tests: each host sends
// exactly the packets a test lists, at the times it lists, and records
// every packet it receives. It lets a test push packets with chosen
// source ports and planes through the fabric and see what the fabric did.
type probeTransport struct{ script map[int][]probeSend }

type probeSend struct {
	at      verbs.Time
	dst     int
	entropy uint16
	plane   uint8
	n       int
}

type probeRecv struct {
	at      verbs.Time
	src     int
	entropy uint16
	plane   uint8
	ce      bool
}

func (probeTransport) Name() string                  { return "probe" }
func (probeTransport) UDPPort() uint16               { return 4794 }
func (probeTransport) NewParams() any                { return &struct{}{} }
func (probeTransport) PacketLens(mtu int) (int, int) { return mtu, 64 }

func (p probeTransport) NewWorld(env WorldEnv, _ any) (World, error) {
	w := &probeWorld{}
	for h := 0; h < env.Hosts; h++ {
		w.hosts = append(w.hosts, &probeHost{sends: p.script[h]})
	}
	return w, nil
}

type probeWorld struct{ hosts []*probeHost }

func (w *probeWorld) Host(i int) verbs.Transport                      { return w.hosts[i] }
func (w *probeWorld) Dial(verbs.Time, int, int) (ConnRef, error)      { return 0, nil }
func (w *probeWorld) Post(verbs.Time, ConnRef, Op, int, uint32) error { return nil }
func (w *probeWorld) Poll(verbs.Time, int, func(Completion))          {}
func (w *probeWorld) Delivered(ConnRef) uint64                        { return 0 }
func (w *probeWorld) Counters() []Field                               { return nil }

// probeHost keeps the Transport contract: a send becomes ready when
// OnTimer reaches its time, and NextDeadline is always the next send not
// yet ready, so OnTimer moves it into the future.
type probeHost struct {
	sends []probeSend
	next  int // next send to hand out
	ready int // sends[:ready] are due
	got   []probeRecv
}

func (h *probeHost) MaxPacketLen() int { return 9000 }

func (h *probeHost) Receive(now verbs.Time, pkt []byte, rx verbs.RxMeta) {
	h.got = append(h.got, probeRecv{at: now, src: int(rx.Peer), entropy: binary.BigEndian.Uint16(pkt), plane: uint8(rx.Plane), ce: rx.CE})
}

func (h *probeHost) NextPacket(now verbs.Time, buf []byte) (verbs.TxMeta, bool) {
	if h.next >= h.ready {
		return verbs.TxMeta{}, false
	}
	s := h.sends[h.next]
	h.next++
	binary.BigEndian.PutUint16(buf, s.entropy)
	return verbs.TxMeta{Len: s.n, Peer: verbs.PeerHandle(s.dst), Entropy: verbs.Entropy(s.entropy), Plane: verbs.PlaneID(s.plane)}, true
}

func (h *probeHost) NextDeadline() verbs.Time {
	if h.ready >= len(h.sends) {
		return verbs.Never
	}
	return h.sends[h.ready].at
}

func (h *probeHost) OnTimer(now verbs.Time) {
	for h.ready < len(h.sends) && h.sends[h.ready].at <= now {
		h.ready++
	}
}

// probeSim builds a run of the probe transport on the fabric described by
// yaml (a workload is required by the schema; the probe ignores it).
func probeSim(t *testing.T, yaml string, script map[int][]probeSend) (*Sim, *probeWorld) {
	t.Helper()
	return probeSimWith(t, yaml, script, nil)
}

// probeSimWith is probeSim with a hook that sees the built Sim before it
// runs (to install traces).
func probeSimWith(t *testing.T, yaml string, script map[int][]probeSend, hook func(*Sim)) (*Sim, *probeWorld) {
	t.Helper()
	e, err := Parse("probe.yaml", []byte(yaml+"\nworkload: {kind: long-lived}\ntransports: [metaroce]\n"), nil)
	require.NoError(t, err)
	runs, err := e.Runs()
	require.NoError(t, err)
	s, err := newSim(runSpec{cfg: runs[0].cfg, transport: probeTransport{script: script}, params: &struct{}{}})
	require.NoError(t, err)
	if hook != nil {
		hook(s)
	}
	_, err = s.run()
	require.NoError(t, err)
	return s, s.world.(*probeWorld)
}

// spaced returns n sends from src to dst, one every gap ns, with entropy
// base+i (or fixed when step is 0).
func spaced(n int, gap verbs.Time, dst int, base, step uint16, plane uint8, size int) []probeSend {
	var s []probeSend
	for i := 0; i < n; i++ {
		s = append(s, probeSend{at: verbs.Time(i) * gap, dst: dst, entropy: base + uint16(i)*step, plane: plane, n: size})
	}
	return s
}
