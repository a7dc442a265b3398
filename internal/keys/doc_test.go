package keys_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/internal/keys"
	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/profile"
	"github.com/metaroce/metaroce/rocev2"
	"github.com/metaroce/metaroce/sim"
)

var update = flag.Bool("update", false, "rewrite docs/config-keys.md from the key tags")

const docPath = "../../docs/config-keys.md"

// frontKeys returns the leaf keys of section (a struct value) as a set.
func frontKeys(section any) map[string]bool {
	m := map[string]bool{}
	for _, l := range keys.Leaves(reflect.ValueOf(section), "") {
		m[l.Key] = true
	}
	return m
}

// transportTable lists one transport's keys: the core's (from its tags,
// with the core's defaults), then those only one front end has.
func transportTable(b *bytes.Buffer, defaults any, prof, exp any) {
	inProf, inExp := frontKeys(prof), frontKeys(exp)
	fmt.Fprintf(b, "| key | `%s` field | default | profile | experiment |\n|---|---|---|---|---|\n", reflect.TypeOf(defaults).String())
	seen := map[string]bool{}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "—"
	}
	for _, l := range keys.Leaves(reflect.ValueOf(defaults), "") {
		seen[l.Key] = true
		fmt.Fprintf(b, "| `%s` | `%s` | %s | %s | %s |\n", l.Key, l.Name, show(l.Value), yes(inProf[l.Key]), yes(inExp[l.Key]))
	}
	for _, front := range []struct {
		v    any
		prof bool
	}{{prof, true}, {exp, false}} {
		for _, l := range keys.Leaves(reflect.ValueOf(front.v), "") {
			if seen[l.Key] {
				continue
			}
			seen[l.Key] = true
			fmt.Fprintf(b, "| `%s` | (%s only: `%s`) | %s | %s | %s |\n", l.Key, map[bool]string{true: "profile", false: "experiment"}[front.prof],
				reflect.TypeOf(front.v).String()+"."+l.Name, show(l.Value), yes(inProf[l.Key]), yes(inExp[l.Key]))
		}
	}
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Float64 {
		return fmt.Sprintf("%g", v.Float())
	}
	return fmt.Sprint(v.Interface())
}

func keysDoc() []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration keys

<!-- Generated from the key tags by TestKeysDoc (internal/keys/doc_test.go):
     go test ./internal/keys -run TestKeysDoc -update
     Do not edit by hand. -->

The protocol cores name each tunable parameter once, with a ` + "`key`" + ` tag on their Config
structs (metaroce/config.go, rocev2/config.go, rocev2/dcqcn_config.go); one walker
(internal/keys) derives both front ends' keys from them, so a parameter has the same name in
a profile of the command (configs/*.yaml, ` + "`--set`" + `, ` + "`METAROCE_*`" + `) as in an experiment file of the
simulator (configs/experiments/*.yaml, ` + "`--set`" + `, ` + "`sweep`" + `):

- profile: ` + "`metaroce.<key>`, `rocev2.<key>`" + ` (dots for a section: ` + "`rocev2.dcqcn.g`" + `);
- experiment: ` + "`transport.metaroce.<key>`, `transport.rocev2.<key>`" + `.

0 (or an absent key) takes the default below, which is the core's. In the simulator ` + "`mtu`" + `
defaults to ` + "`transport.mtu`" + ` and ` + "`planes`" + ` to ` + "`topology.planes`" + ` (at most that); the fields without a
tag (identity, addresses, link rate, queue depths) are the program's to set. Durations need a
unit (` + "`200us`" + `). What each parameter does: the field's comment in the core, and
[congestion.md](congestion.md) for congestion control and path health.

## metaroce

`)
	transportTable(&b, mr.Config{}.Defaults(), profile.Default().Metaroce, sim.MetaRoCEParams{})
	b.WriteString("\n## rocev2\n\n")
	transportTable(&b, rocev2.Config{}.Defaults(), profile.Default().RoCEv2, sim.RoCEv2Params{})
	b.WriteString(`
## security

Profiles only (the command and the verbs library; the simulator runs mode none): the metaroce
transport's packet protection, [security.md](security.md). ` + "`mode`" + ` none keeps the CRC32C;
auth and encrypt seal every packet with AES-GCM under per-connection keys that follow from the
pre-shared key in ` + "`psk_file`" + ` (at least 16 bytes). An empty or zero value takes the default.

| key | ` + "`profile.Security`" + ` field | default |
|---|---|---|
`)
	for _, l := range keys.Leaves(reflect.ValueOf(profile.Default().Security), "") {
		fmt.Fprintf(&b, "| `security.%s` | `%s` | %s |\n", l.Key, l.Name, show(l.Value))
	}
	return b.Bytes()
}

// TestKeysDoc: docs/config-keys.md is what the tags say (-update rewrites
// it), so the list of keys cannot go stale.
func TestKeysDoc(t *testing.T) {
	got := keysDoc()
	if *update {
		if err := os.WriteFile(docPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (go test ./internal/keys -run TestKeysDoc -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("%s is stale: go test ./internal/keys -run TestKeysDoc -update rewrites it", docPath)
	}
	for _, k := range []string{"`path_window`", "`keepalive_interval`", "`dcqcn.cnp_interval`", "`link_gbps`", "`no_rate_hints`"} {
		if !strings.Contains(string(got), k) {
			t.Errorf("docs lack %s", k)
		}
	}
}

// TestKeysUnique: no two fields share a key at one level of any
// configuration (a duplicate would shadow one silently), and every core
// key is a key of both front ends.
func TestKeysUnique(t *testing.T) {
	visited := map[reflect.Type]bool{}
	var check func(typ reflect.Type, where string)
	check = func(typ reflect.Type, where string) {
		if visited[typ] {
			return // yaml.Node refers to itself
		}
		visited[typ] = true
		seen := map[string]string{}
		for _, f := range keys.Fields(typ) {
			if prev, ok := seen[f.Key]; ok {
				t.Errorf("%s: key %q is both %s and %s", where, f.Key, prev, f.Name)
			}
			seen[f.Key] = f.Name
			if f.Type.Kind() == reflect.Struct && keys.IsSection(f.Type) {
				check(f.Type, where+"."+f.Key)
			}
		}
	}
	for _, v := range []any{profile.Config{}, sim.MetaRoCEParams{}, sim.RoCEv2Params{}, sim.Config{}} {
		check(reflect.TypeOf(v), reflect.TypeOf(v).String())
	}
	for _, c := range []struct{ core, prof, exp any }{
		{mr.Config{}, profile.Default().Metaroce, sim.MetaRoCEParams{}},
		{rocev2.Config{}, profile.Default().RoCEv2, sim.RoCEv2Params{}},
	} {
		p, e := frontKeys(c.prof), frontKeys(c.exp)
		n := 0
		for k := range frontKeys(c.core) {
			n++
			if !p[k] || !e[k] {
				t.Errorf("%T key %s: profile %v, experiment %v", c.core, k, p[k], e[k])
			}
		}
		if n < 10 {
			t.Errorf("%T: %d keys, want the core's tunables", c.core, n)
		}
	}
}
