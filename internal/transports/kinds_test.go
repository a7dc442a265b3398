package transports_test

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine/udp"
	"github.com/metaroce/metaroce/internal/transports"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/verbs"
)

// TestKindsComplete: both transports have every function (OpenQP only
// where verbs QPs are opened one to one), a UDP port and a checksum
// default; a new field of Kind is covered too.
func TestKindsComplete(t *testing.T) {
	funcs := 0
	for name, k := range transports.Kinds {
		v := reflect.ValueOf(k)
		for i := 0; i < v.NumField(); i++ {
			f, field := v.Field(i), v.Type().Field(i).Name
			if f.Kind() != reflect.Func || field == "OpenQP" {
				continue
			}
			funcs++
			if f.IsNil() {
				t.Errorf("Kinds[%q].%s is nil", name, field)
			}
		}
		if k.UDPPort == 0 || transports.UDPPortFor(name) != k.UDPPort {
			t.Errorf("Kinds[%q].UDPPort is %d", name, k.UDPPort)
		}
		if k.UDPChecksum != "zero" && k.UDPChecksum != "compute" {
			t.Errorf("Kinds[%q].UDPChecksum is %q", name, k.UDPChecksum)
		}
	}
	if len(transports.Kinds) != 2 || funcs != 2*3 {
		t.Fatalf("checked %d functions of %d transports", funcs, len(transports.Kinds))
	}
	if _, err := transports.Of("iwarp"); err == nil {
		t.Fatal("an unknown transport has a kind")
	}
}

// TestVerbsDevices builds each transport as the verbs library does, on a
// UDP backend on loopback: metaroce's QPs come from sessions (no OpenQP),
// rocev2's are opened one to one with the caller's QPN.
func TestVerbsDevices(t *testing.T) {
	cfg := profile.Default()
	for _, tr := range []profile.Transport{profile.TransportMetaroce, profile.TransportRoCEv2} {
		be, err := udp.New(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		k, err := transports.Of(tr)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := k.NewDevice(cfg, be, transports.Options{ID: 7, Depth: 4096, Verbs: true})
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		if (k.OpenQP != nil) != (tr == profile.TransportRoCEv2) {
			t.Fatalf("%s: OpenQP %v", tr, k.OpenQP != nil)
		}
		if k.OpenQP == nil {
			continue
		}
		peer, err := be.AddPeer(netip.MustParseAddrPort("127.0.0.2:4791"))
		if err != nil {
			t.Fatal(err)
		}
		cq := verbs.NewCompletionQueue(4)
		q, setPSN, err := k.OpenQP(dev, be.Now(), peer, 0xABC01, 0xDEF01, 5, verbs.QPAttr{PD: dev.AllocPD(), SendCQ: cq, RecvCQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		if q.QPN() != 0xABC01 || setPSN(9) != nil {
			t.Fatalf("QPN %#x", q.QPN())
		}
	}
}

// TestVerbsConnectBudget: verbs peers keep the fixed 10 ms CONNECT
// interval for 1000 attempts (10 s, docs/verbs.md), not the CLI's doubling
// waits, which would stretch 1000 attempts to 100 s.
func TestVerbsConnectBudget(t *testing.T) {
	mc := mr.Config{}
	transports.VerbsConnect(&mc)
	mc = mc.Defaults()
	if got := verbs.RetryBudget(mc.ConnectRetry, mc.ConnectRetryMax, mc.ConnectRetries); got != 10*time.Second {
		t.Fatalf("verbs connect budget %v, want 10s", got)
	}
}
