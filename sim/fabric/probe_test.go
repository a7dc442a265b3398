package fabric

import (
	"encoding/binary"
	"github.com/metaroce/metaroce/verbs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/metaroce/metaroce/sim/event"
	"github.com/metaroce/metaroce/sim/units"
)

// The probe is a scripted transport for model tests: each host sends
// exactly the packets a test lists, at the times it lists, and records
// every packet it receives. It lets a test push packets with chosen
// source ports and planes through the fabric and see what the fabric did.

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

// probeUDPPort is the probe's UDP destination port (ECMP hashes it).
const probeUDPPort = 4794

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
	return verbs.TxMeta{Len: s.n, Peer: verbs.PeerHandle(s.dst), TxRoute: verbs.TxRoute{Entropy: verbs.Entropy(s.entropy), Plane: verbs.PlaneID(s.plane)}}, true
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

// probeConfig is the part of an experiment file a fabric is built from.
type probeConfig struct {
	Duration units.Duration  `yaml:"duration"`
	Seed     uint64          `yaml:"seed"`
	Topology TopologyConfig  `yaml:"topology"`
	Loss     LossConfig      `yaml:"loss"`
	Failures []FailureConfig `yaml:"failures"`
}

// probeSim runs the probe on the fabric described by yaml (an experiment
// file's duration, seed, topology, loss and failures, with their defaults)
// and returns the fabric after the run and the probe's hosts.
func probeSim(t *testing.T, yaml string, script map[int][]probeSend) (*Fabric, []*probeHost) {
	t.Helper()
	return probeSimWith(t, yaml, script, nil)
}

// probeSimWith is probeSim with a hook that sees the built fabric before
// it runs (to install traces).
func probeSimWith(t *testing.T, text string, script map[int][]probeSend, hook func(*Fabric)) (*Fabric, []*probeHost) {
	t.Helper()
	f, hosts, end, err := buildProbe(text, script)
	require.NoError(t, err)
	if hook != nil {
		hook(f)
	}
	runProbe(f, end)
	return f, hosts
}

// buildProbe decodes text strictly, fills the defaults and builds the
// fabric with the probe's hosts attached; end is when the run ends.
func buildProbe(text string, script map[int][]probeSend) (f *Fabric, hosts []*probeHost, end verbs.Time, err error) {
	c := probeConfig{Duration: units.Duration(time.Millisecond)}
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, nil, 0, err
	}
	if err := c.Topology.Defaults(); err != nil {
		return nil, nil, 0, err
	}
	if err := c.Loss.Validate(); err != nil {
		return nil, nil, 0, err
	}
	if err := ValidateFailures(c.Failures, c.Topology.Planes); err != nil {
		return nil, nil, 0, err
	}
	q := &event.Queue{}
	f, err = New(Spec{Topology: &c.Topology, Loss: &c.Loss, Failures: c.Failures, Seed: c.Seed, DPort: probeUDPPort}, q)
	if err != nil {
		return nil, nil, 0, err
	}
	for h := 0; h < f.Hosts(); h++ {
		hosts = append(hosts, &probeHost{sends: script[h]})
	}
	f.Attach(func(h int) verbs.Transport { return hosts[h] }, func(int) {}, nil)
	return f, hosts, c.Duration.T(), nil
}

// probeStop is the probe run's own event, after the fabric's kinds.
const probeStop = NumKinds

// runProbe runs the fabric to its end as a run does: the start kicks
// every host, then the fabric's events in order until the stop event.
func runProbe(f *Fabric, end verbs.Time) {
	f.KickAll()
	f.q.Push(end, probeStop, 0, 0)
	f.ScheduleFaults(end)
	for f.q.Len() > 0 {
		e := f.q.Pop()
		if e.Kind == probeStop {
			return
		}
		f.Handle(&e)
	}
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
