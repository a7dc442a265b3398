package main

import (
	"reflect"
	"testing"

	"github.com/metaroce/metaroce/engine/memlink"
	"github.com/metaroce/metaroce/engine/mempair"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/metrics"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/verbs"
)

// reasons turns a snapshot's counts into a map, failing on a reason given
// twice (two series with one label set).
func reasons(t *testing.T, cs []metrics.Count) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, c := range cs {
		if _, dup := m[c.Reason]; dup {
			t.Fatalf("reason %q twice", c.Reason)
		}
		m[c.Reason] = c.N
	}
	return m
}

// writeOver moves 1 MiB A -> B over a link that duplicates and corrupts
// packets, with A and B the two devices, and returns B's session.
func writeOver(t *testing.T, a, b verbs.Device) verbs.Session {
	t.Helper()
	p := mempair.NewTransports(a, b, memlink.Config{Seed: 3, Delay: 2000, Duplicate: 0.05, Corrupt: 0.02})
	sa, err := a.Dial(p.Now, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var sb verbs.Session
	if err := p.RunUntil(func() bool {
		if sb == nil {
			sb, _ = b.Accept()
		}
		return sb != nil && sa.Established() && sb.Established()
	}, p.Now+1e9); err != nil {
		t.Fatal(err)
	}
	cq := verbs.NewCompletionQueue(4)
	pa, pb := a.AllocPD(), b.AllocPD()
	qa, err := sa.CreateQP(0, verbs.QPAttr{PD: pa, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	cqb := verbs.NewCompletionQueue(4)
	if _, err := sb.CreateQP(0, verbs.QPAttr{PD: pb, SendCQ: cqb, RecvCQ: cqb}); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	src, _ := pa.RegisterMR(make([]byte, n), 0)
	dst, err := pb.RegisterMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := qa.PostSend(p.Now, verbs.SendWR{ID: 1, Opcode: verbs.WRWrite, Local: src.SGE(0, n),
		RemoteAddr: dst.Addr(), RKey: dst.RKey()}); err != nil {
		t.Fatal(err)
	}
	var wc [1]verbs.WorkCompletion
	if err := p.RunUntil(func() bool { return cq.Poll(wc[:]) == 1 }, p.Now+20e9); err != nil {
		t.Fatal(err)
	}
	if wc[0].Status != verbs.StatusSuccess {
		t.Fatalf("completion %+v", wc[0])
	}
	return sb
}

// TestMetaroceDropMetrics: the receiver's duplicates and CRC failures on a
// link that duplicates and corrupts reach the metrics copy, each under its
// reason, with the core's own figures.
func TestMetaroceDropMetrics(t *testing.T) {
	ea, err := mr.NewEndpoint(mr.Config{Node: 1, Incarnation: 1, Paths: 4, MTU: 1024})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := mr.NewEndpoint(mr.Config{Node: 2, Incarnation: 1, Paths: 4, MTU: 1024, AcceptIncoming: true})
	if err != nil {
		t.Fatal(err)
	}
	sb := writeOver(t, ea.Device(), eb.Device())
	conns := metaroceSnapshot([]verbs.Session{sb})
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	c := sb.(mr.Session).C.Counters()
	got := reasons(t, conns[0].RxDropped)
	for _, r := range []string{"crc", "malformed", "duplicate", "stale_generation", "stale_incarnation", "out_of_window", "access", "length", "placed_again"} {
		if _, ok := got[r]; !ok {
			t.Errorf("no reason %q in %v", r, got)
		}
	}
	if got["duplicate"] == 0 || got["duplicate"] != c.Duplicates {
		t.Errorf("duplicate %d, core %d", got["duplicate"], c.Duplicates)
	}
	if got["crc"] != c.CRCDrops {
		t.Errorf("crc %d, core %d", got["crc"], c.CRCDrops)
	}
	if x := reasons(t, conns[0].TxExtra); len(x) != 2 {
		t.Errorf("tx extra reasons %v, want probe and moved", x)
	}
	ep := reasons(t, metaroceEndpoint(eb.Device()).RxDropped)
	if ep["crc"] == 0 || ep["crc"] != eb.Counters().CRCDrops || len(ep) != 3 {
		t.Errorf("endpoint %v, core crc %d", ep, eb.Counters().CRCDrops)
	}
	t.Logf("receiver: conn %v, endpoint %v", got, ep)
}

// TestRoCEv2DropMetrics: the same for a RoCEv2 QP: ICRC failures, requests
// already executed and requests behind a gap.
func TestRoCEv2DropMetrics(t *testing.T) {
	ea, err := rocev2.NewEndpoint(rocev2.Config{LocalIP: rocev2.DefaultPeerIP(0), MTU: 1024})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := rocev2.NewEndpoint(rocev2.Config{LocalIP: rocev2.DefaultPeerIP(1), MTU: 1024, AcceptIncoming: true})
	if err != nil {
		t.Fatal(err)
	}
	sb := writeOver(t, ea.Device(), eb.Device())
	conns := rocev2Snapshot([]verbs.Session{sb})
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	c := sb.(*rocev2.Session).Conns[0].Counters()
	got := reasons(t, conns[0].RxDropped)
	if got["duplicate"] == 0 || got["duplicate"] != c.Duplicates {
		t.Errorf("duplicate %d, core %d", got["duplicate"], c.Duplicates)
	}
	if got["crc"] == 0 || got["crc"] != c.ICRCDrops {
		t.Errorf("crc %d, core %d", got["crc"], c.ICRCDrops)
	}
	if got["out_of_sequence"] != c.OutOfSequence {
		t.Errorf("out_of_sequence %d, core %d", got["out_of_sequence"], c.OutOfSequence)
	}
	ep := reasons(t, rocev2Endpoint(eb.Device()).RxDropped)
	if ep["crc"] == 0 || ep["crc"] != eb.Counters().ICRCDrops || len(ep) != 3 {
		t.Errorf("endpoint %v, core crc %d", ep, eb.Counters().ICRCDrops)
	}
	t.Logf("receiver: conn %v, endpoint %v", got, ep)
}

// Every transport in transportKinds fills every function of its entry: a
// nil one would panic the first time the node, the metrics sampler or
// perf's summary asked it. Checked by reflection so that a function
// added to transportKind later is covered too.
func TestTransportKindsComplete(t *testing.T) {
	funcs := 0
	for name, k := range transportKinds {
		v := reflect.ValueOf(k)
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Kind() != reflect.Func {
				continue
			}
			funcs++
			if f.IsNil() {
				t.Errorf("transportKinds[%q].%s is nil", name, v.Type().Field(i).Name)
			}
		}
		if k.udpPort == 0 {
			t.Errorf("transportKinds[%q].udpPort is 0", name)
		}
		if k.udpChecksum != "zero" && k.udpChecksum != "compute" {
			t.Errorf("transportKinds[%q].udpChecksum is %q", name, k.udpChecksum)
		}
	}
	if len(transportKinds) < 2 || funcs < 2*5 {
		t.Fatalf("checked %d functions of %d transports; want both transports' entries", funcs, len(transportKinds))
	}
}
