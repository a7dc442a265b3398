package profile

import (
	"reflect"
	"sort"
	"strings"

	"github.com/metaroce/metaroce/internal/keys"
)

// Fields maps every leaf key ("udp.loss") of c to its field, addressable
// through c: setting a field changes c. The keys come from the `key` tags
// (internal/keys), the core parameters' from the cores' own Config tags.
func (c *Config) Fields() map[string]reflect.Value {
	m := map[string]reflect.Value{}
	for _, l := range keys.Leaves(reflect.ValueOf(c), "") {
		m[l.Key] = l.Value
	}
	return m
}

// Keys lists every leaf key, sorted.
func Keys() []string {
	c := Default()
	var ks []string
	for k := range c.Fields() {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// IsSection reports whether key names a section (udp, bench.sweep).
func IsSection(key string) bool {
	for _, k := range Keys() {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

// Set converts raw (a YAML value: string, bool, int, float64, []any; or a
// string from the environment or a flag) into the field f. The error says
// what was wrong with the value, without naming the key.
func Set(f reflect.Value, raw any) error { return keys.Set(f, raw) }
