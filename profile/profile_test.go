package profile

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSetConverts(t *testing.T) {
	c := Default()
	f := c.Fields()
	for k, raw := range map[string]any{
		"udp.loss": "1%", "metaroce.paths": "16", "bench.duration": "500ms", "rocev2.dcqcn.disable": "true",
		"metaroce.entropy_base": "50000", "rocev2.ack_timeout_code": 12,
		"bench.sweep.loss": []any{0, 0.01}, "bench.sweep.size": "4096,65536", "dpdk.eal": []any{"-l", "0-1"},
	} {
		if err := Set(f[k], raw); err != nil {
			t.Fatalf("%s=%v: %v", k, raw, err)
		}
	}
	if c.UDP.Loss != 0.01 || c.Metaroce.Paths != 16 || c.Bench.Duration != 500*time.Millisecond || !c.RoCEv2.DCQCN.Disable ||
		c.Metaroce.EntropyBase != 50000 || c.RoCEv2.AckTimeoutCode != 12 ||
		len(c.Bench.Sweep.Loss) != 2 || c.Bench.Sweep.Size[1] != 65536 || c.DPDK.EAL[1] != "0-1" {
		t.Fatalf("%+v", c)
	}
	for k, raw := range map[string]any{"udp.loss": "lots", "metaroce.paths": 1.5, "bench.duration": 3, "name": 4,
		"metaroce.entropy_base": 70000, "rocev2.ack_timeout_code": -1} {
		if err := Set(f[k], raw); err == nil {
			t.Errorf("%s=%v: no error", k, raw)
		}
	}
}

func TestValidateNamesKey(t *testing.T) {
	for key, mut := range map[string]func(*Config){
		"backend":          func(c *Config) { c.Backend = "ebpf" },
		"udp.loss":         func(c *Config) { c.UDP.Loss = 2 },
		"metaroce.paths":   func(c *Config) { c.Metaroce.Paths = 0 },
		"rocev2.mtu":       func(c *Config) { c.RoCEv2.MTU = 1500 },
		"bench.sweep.qps":  func(c *Config) { c.Bench.Sweep.QPs = []int{0} },
		"udp.server_ip":    func(c *Config) { c.UDP.ServerIP = "::1" },
		"bench.transports": func(c *Config) { c.Bench.Transports = []string{"iwarp"} },
	} {
		c := Default()
		mut(&c)
		var fe *FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Key != key {
			t.Errorf("%s: got %v", key, err)
		}
	}
}

func TestKeysAndSections(t *testing.T) {
	if !IsSection("bench.sweep") || IsSection("udp.loss") || len(Keys()) < 40 {
		t.Fatal(len(Keys()))
	}
}

// Congestion-control keys are checked by the protocol core itself, and an
// error names the profile key, not the core's field.
func TestMetaroceCoreKeysValidated(t *testing.T) {
	for key, set := range map[string]func(*Config){
		"metaroce.ecn_gain":         func(c *Config) { c.Metaroce.ECNGain = 2 },
		"metaroce.hint_utilization": func(c *Config) { c.Metaroce.HintUtilization = 1.5 },
		"metaroce.link_gbps":        func(c *Config) { c.Metaroce.LinkGbps = -1 },
		"metaroce.min_window":       func(c *Config) { c.Metaroce.MinWindow = 500 },
		"metaroce.min_rto":          func(c *Config) { c.Metaroce.MinRTO = time.Second },
	} {
		c := Default()
		set(&c)
		err := c.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Key != key {
			t.Errorf("%s: got %v, want a FieldError for that key", key, err)
		}
	}
	c := Default()
	c.RoCEv2.DCQCN.G = 2
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Key != "rocev2.dcqcn.g" {
		t.Errorf("rocev2.dcqcn.g: got %v, want a FieldError for that key", err)
	}
	c = Default()
	c.Metaroce.LinkGbps, c.Metaroce.HintInterval = 100, 32*time.Microsecond
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Metaroce.Core(); got.LinkRateBps != 100e9 || got.HintInterval != 32*time.Microsecond {
		t.Fatalf("Core() = %+v", got)
	}
}

// The dpdk section's lists of ports and neighbours are lists of maps,
// decoded strictly: an unknown key inside an item is an error naming it.
func TestSetListOfMaps(t *testing.T) {
	c := Default()
	f := c.Fields()
	ports := []any{map[string]any{"name": "net_memif0", "ip": "10.0.0.1/24", "queues": 2}, map[string]any{"name": "net_memif1", "ip": "10.0.0.2"}}
	if err := Set(f["dpdk.ports"], ports); err != nil {
		t.Fatal(err)
	}
	if len(c.DPDK.Ports) != 2 || c.DPDK.Ports[0].Queues != 2 || c.DPDK.Ports[1].IP != "10.0.0.2" {
		t.Fatalf("%+v", c.DPDK.Ports)
	}
	for _, raw := range []any{
		[]any{map[string]any{"nmae": "x"}},
		[]any{map[string]any{"queues": "many"}},
		[]any{"net_memif0"},
		"net_memif0",
	} {
		if err := Set(f["dpdk.ports"], raw); err == nil {
			t.Errorf("%v: no error", raw)
		}
	}
	err := Set(f["dpdk.neighbours"], []any{map[string]any{"peer": 1, "mca": "x"}})
	if err == nil || !strings.Contains(err.Error(), "unknown key mca") {
		t.Fatalf("%v", err)
	}
}
