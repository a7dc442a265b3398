package main

import (
	"reflect"
	"slices"
	"testing"
	"time"

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

// wantReasons fails unless got has exactly the reasons want: a reason
// added to a snapshot (or lost from it) must be added here and in the
// README's table.
func wantReasons(t *testing.T, got map[string]uint64, want ...string) {
	t.Helper()
	var have []string
	for r := range got {
		have = append(have, r)
	}
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("reasons %v, want %v", have, want)
	}
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
	wantReasons(t, got, "crc", "malformed", "duplicate", "stale_generation", "stale_incarnation", "out_of_window",
		"access", "length", "placed_again", "held_full", "auth", "replay", "replay_old", "bad_token", "generation_refused")
	if got["held_full"] != c.LastChunksRefused {
		t.Errorf("held_full %d, core %d", got["held_full"], c.LastChunksRefused)
	}
	if conns[0].LastChunksHeld != c.LastChunksHeld || conns[0].CopiesCancelled != c.CopiesCancelled {
		t.Errorf("held %d cancelled %d, core %d %d", conns[0].LastChunksHeld, conns[0].CopiesCancelled,
			c.LastChunksHeld, c.CopiesCancelled)
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
	if ep["crc"] == 0 || ep["crc"] != eb.Counters().CRCDrops || len(ep) != 5 {
		t.Errorf("endpoint %v, core crc %d", ep, eb.Counters().CRCDrops)
	}
	t.Logf("receiver: conn %v, endpoint %v", got, ep)
}

// TestMetaroceSealedDropMetrics: in auth mode the same link's corrupted
// packets fail their tag (not a CRC) and its duplicates are refused as
// replays before the scoreboard; both reach the metrics copy under their
// reasons, auth and replay, with the core's figures.
func TestMetaroceSealedDropMetrics(t *testing.T) {
	// RekeyPackets and KeyHold small: the transfer moves through key
	// epochs, which the metrics copy counts as key updates.
	sec := mr.Security{Mode: mr.SecurityAuth, Secret: []byte("the metrics test's shared secret"),
		RekeyPackets: 64, KeyHold: 2 * time.Microsecond}
	ea, err := mr.NewEndpoint(mr.Config{Node: 1, Incarnation: 1, Paths: 4, MTU: 1024, Security: sec, Rand: verbs.NewSeededRandom(1)})
	if err != nil {
		t.Fatal(err)
	}
	eb, err := mr.NewEndpoint(mr.Config{Node: 2, Incarnation: 1, Paths: 4, MTU: 1024, AcceptIncoming: true, Security: sec, Rand: verbs.NewSeededRandom(2)})
	if err != nil {
		t.Fatal(err)
	}
	sb := writeOver(t, ea.Device(), eb.Device())
	conns := metaroceSnapshot([]verbs.Session{sb})
	c := sb.(mr.Session).C.Counters()
	got := reasons(t, conns[0].RxDropped)
	if got["auth"] == 0 || got["auth"] != c.AuthFailures || got["replay"] == 0 || got["replay"] != c.Replays ||
		got["crc"] != 0 || got["duplicate"] != 0 {
		t.Errorf("conn %v, core auth %d replay %d", got, c.AuthFailures, c.Replays)
	}
	if conns[0].KeyUpdates == 0 || conns[0].KeyUpdates != c.KeyUpdates {
		t.Errorf("key updates %d, core %d", conns[0].KeyUpdates, c.KeyUpdates)
	}
	ep := reasons(t, metaroceEndpoint(eb.Device()).RxDropped)
	if ep["auth"] != eb.Counters().AuthFailures || ep["seal_mismatch"] != eb.Counters().SealMismatch {
		t.Errorf("endpoint %v", ep)
	}
	t.Logf("receiver: conn %v, endpoint %v, key updates %d", got, ep, c.KeyUpdates)
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
		if k.NewDevice == nil {
			t.Errorf("transportKinds[%q] has no internal/transports kind", name)
		}
	}
	if len(transportKinds) < 2 || funcs < 2*3 {
		t.Fatalf("checked %d functions of %d transports; want both transports' entries", funcs, len(transportKinds))
	}
}

// dialRefused dials b from a dials times (one connection each) over a
// clean link until refused() holds, and returns b's endpoint metrics.
func dialRefused(t *testing.T, a, b verbs.Device, dials int, refused func() bool, endpoint func(verbs.Device) metrics.Endpoint) metrics.Endpoint {
	t.Helper()
	p := mempair.NewTransports(a, b, memlink.Config{Seed: 1, Delay: 2000})
	for i := 0; i < dials; i++ {
		if _, err := a.Dial(p.Now, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.RunUntil(refused, p.Now+1e9); err != nil {
		t.Fatal(err)
	}
	return endpoint(b)
}

// TestMetaroceRefusalMetrics: CONNECTs refused by a real endpoint (not
// accepting; over its per-peer bound) reach the metrics copy under their
// reasons, with the RESETs that answered them, equal to the core's
// counters.
func TestMetaroceRefusalMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		cfg          mr.Config
		dials        int
		core         func(*mr.EndpointCounters) uint64
	}{
		{"not accepting", "not_accepting", mr.Config{}, 1, func(c *mr.EndpointCounters) uint64 { return c.RefusedNotAccepting }},
		{"per peer", "per_peer", mr.Config{AcceptIncoming: true, MaxConnsPerPeer: 1}, 2,
			func(c *mr.EndpointCounters) uint64 { return c.RefusedPerPeer }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ea, err := mr.NewEndpoint(mr.Config{Node: 1, Incarnation: 1, Paths: 2})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			cfg.Node, cfg.Incarnation, cfg.Paths = 2, 1, 2
			eb, err := mr.NewEndpoint(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ep := dialRefused(t, ea.Device(), eb.Device(), tc.dials, func() bool { return tc.core(eb.Counters()) > 0 }, metaroceEndpoint)
			c := eb.Counters()
			refused := reasons(t, ep.ConnectsRefused)
			wantReasons(t, refused, "max_conns", "per_peer", "backlog", "not_accepting")
			var sum uint64
			for r, n := range refused {
				sum += n
				if r != tc.reason && n != 0 {
					t.Errorf("reason %s counted %d", r, n)
				}
			}
			if refused[tc.reason] == 0 || refused[tc.reason] != tc.core(c) || sum != c.ConnectsRefused {
				t.Errorf("refused %v, core %+v", refused, *c)
			}
			resets := reasons(t, ep.Resets)
			wantReasons(t, resets, "sent", "rate_limited")
			if resets["sent"] == 0 || resets["sent"] != c.ResetsSent || resets["rate_limited"] != c.ResetsLimited {
				t.Errorf("resets %v, core %+v", resets, *c)
			}
			failed := reasons(t, ep.ConnsFailed)
			wantReasons(t, failed, "half_open_evicted", "peer_restart")
			if failed["half_open_evicted"] != c.HalfOpenEvicted || failed["peer_restart"] != c.PeerRestarts {
				t.Errorf("failed %v, core %+v", failed, *c)
			}
		})
	}
}

// TestRoCEv2RefusalMetrics: the same for CM REQs: REJ Consumer Reject
// (not accepting), REJ No QP (MaxQPs). RoCEv2 has no RESET and evicts
// nothing, so those families are absent.
func TestRoCEv2RefusalMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		cfg          rocev2.Config
		dials        int
		core         func(*rocev2.EndpointCounters) uint64
	}{
		{"not accepting", "not_accepting", rocev2.Config{}, 1,
			func(c *rocev2.EndpointCounters) uint64 { return c.RefusedNotAccepting }},
		{"max qps", "max_conns", rocev2.Config{AcceptIncoming: true, MaxQPs: 1}, 2,
			func(c *rocev2.EndpointCounters) uint64 { return c.RefusedMaxQPs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ea, err := rocev2.NewEndpoint(rocev2.Config{LocalIP: rocev2.DefaultPeerIP(0)})
			if err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			cfg.LocalIP = rocev2.DefaultPeerIP(1)
			eb, err := rocev2.NewEndpoint(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ep := dialRefused(t, ea.Device(), eb.Device(), tc.dials, func() bool { return tc.core(eb.Counters()) > 0 }, rocev2Endpoint)
			c := eb.Counters()
			refused := reasons(t, ep.ConnectsRefused)
			wantReasons(t, refused, "max_conns", "not_accepting")
			if refused[tc.reason] == 0 || refused[tc.reason] != tc.core(c) {
				t.Errorf("refused %v, core %+v", refused, *c)
			}
			for r, n := range refused {
				if r != tc.reason && n != 0 {
					t.Errorf("reason %s counted %d", r, n)
				}
			}
			if ep.Resets != nil || ep.ConnsFailed != nil {
				t.Errorf("rocev2 shows resets %v, failures %v", ep.Resets, ep.ConnsFailed)
			}
		})
	}
}
