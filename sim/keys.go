package sim

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/metaroce/metaroce/internal/keys"
)

// The experiment file is decoded strictly, and every key, whether in the
// file, in --set or in sweep, is checked against the schema (Config and
// the transports' parameter structs) first, so that a mistyped key fails
// with its name, where it is, and the keys that would have been valid.
// The schema is walked by internal/keys, the walker the profiles use too:
// Config's structs by their yaml tags, the transports' parameters by the
// cores' own `key` tags, so a core parameter has the same name here
// (transport.metaroce.path_window) as in a profile (metaroce.path_window).

var (
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	nodeType        = reflect.TypeOf(yaml.Node{})
	transportType   = reflect.TypeOf(TransportConfig{})
)

// child returns the type under key k of a value of type t, or an error
// naming the valid keys. where is the dotted path of t, for messages.
func child(t reflect.Type, k, where string) (reflect.Type, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if f, ok := keys.Lookup(t, k); ok {
			return f.Type, nil
		}
		names := keys.Names(t)
		if t == transportType {
			if tr, ok := lookupTransport(k); ok {
				return reflect.TypeOf(tr.NewParams()), nil
			}
			names = append(names, Transports()...)
		}
		sort.Strings(names)
		in := "at the top level"
		if where != "" {
			in = "in " + where
		}
		return nil, fmt.Errorf("unknown key %q %s (known keys: %s)", k, in, strings.Join(names, ", "))
	case reflect.Map:
		return t.Elem(), nil
	case reflect.Slice:
		if _, err := strconv.Atoi(k); err != nil {
			return nil, fmt.Errorf("%s is a list: want an index, not %q", where, k)
		}
		return t.Elem(), nil
	}
	return nil, fmt.Errorf("%s is a single value: it has no key %q", where, k)
}

func isLeaf(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) || t == nodeType {
		return true
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Slice
}

// checkNode verifies every key under n against type t.
func checkNode(n *yaml.Node, t reflect.Type, where string) error {
	if n == nil || isLeaf(t) || n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Slice {
			return fmt.Errorf("line %d: %s must be a list", n.Line, where)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if t.Kind() == reflect.Map {
				if err := checkNode(v, t.Elem(), join(where, k.Value)); err != nil {
					return err
				}
				continue
			}
			ct, err := child(t, k.Value, where)
			if err != nil {
				return fmt.Errorf("line %d: %w", k.Line, err)
			}
			if err := checkNode(v, ct, join(where, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return fmt.Errorf("line %d: %s must not be a list", n.Line, where)
		}
		for i, v := range n.Content {
			if err := checkNode(v, t.Elem(), join(where, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	default:
		if t.Kind() == reflect.Struct || t.Kind() == reflect.Map {
			return fmt.Errorf("line %d: %s must be a mapping of keys, not %q", n.Line, where, n.Value)
		}
	}
	return nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// resolveKey checks a dotted key against the schema and returns its type.
func resolveKey(key string) (reflect.Type, error) {
	if key == "" {
		return nil, fmt.Errorf("empty key")
	}
	t := reflect.TypeOf(Config{})
	where := ""
	for _, k := range strings.Split(key, ".") {
		if k == "sweep" && where == "" {
			return nil, fmt.Errorf("use sweep.<key>=[values] to change a sweep")
		}
		ct, err := child(t, k, where)
		if err != nil {
			return nil, err
		}
		t, where = ct, join(where, k)
	}
	return t, nil
}

// setKey sets the dotted key under mapping node root to v, creating
// mappings on the way. List elements are addressed by index and must
// exist.
func setKey(root *yaml.Node, key string, v *yaml.Node) error {
	parts := strings.Split(key, ".")
	n := root
	for i, k := range parts {
		last := i == len(parts)-1
		switch n.Kind {
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= len(n.Content) {
				return fmt.Errorf("%s: no element %s (the list has %d)", strings.Join(parts[:i], "."), k, len(n.Content))
			}
			if last {
				n.Content[idx] = v
				return nil
			}
			n = n.Content[idx]
			continue
		case yaml.ScalarNode:
			if n.Tag != "!!null" {
				return fmt.Errorf("%s is a single value, not a mapping", strings.Join(parts[:i], "."))
			}
			*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		case yaml.MappingNode:
		default:
			return fmt.Errorf("%s cannot be set", key)
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				next = n.Content[j+1]
				if last {
					n.Content[j+1] = v
					return nil
				}
			}
		}
		if next == nil {
			if last {
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, v)
				return nil
			}
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, next)
		}
		n = next
	}
	return nil
}

// getKey returns the node at a dotted key under root, or nil.
func getKey(root *yaml.Node, key string) *yaml.Node {
	n := root
	for _, k := range strings.Split(key, ".") {
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == k {
					next = n.Content[j+1]
				}
			}
			if next == nil {
				return nil
			}
			n = next
		case yaml.SequenceNode:
			idx, err := strconv.Atoi(k)
			if err != nil || idx < 0 || idx >= len(n.Content) {
				return nil
			}
			n = n.Content[idx]
		default:
			return nil
		}
	}
	return n
}

// parseValue parses a --set value as YAML (so 0.02 is a number, [1, 2] a
// list and "x" a string).
func parseValue(s string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("value %q is not valid YAML: %w", s, err)
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, nil
	}
	return doc.Content[0], nil
}

// cloneNode deep-copies a YAML tree.
func cloneNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = cloneNode(k)
	}
	return &c
}

// scalarValue is how a swept value appears in result rows: a number, a
// bool or a string.
func scalarValue(n *yaml.Node) any {
	if n.Kind != yaml.ScalarNode {
		b, _ := yaml.Marshal(n)
		return strings.TrimSpace(string(b))
	}
	switch n.Tag {
	case "!!int":
		if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return v
		}
	case "!!float":
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return v
		}
	case "!!bool":
		return n.Value == "true"
	case "!!null":
		return nil
	}
	return n.Value
}

// decode decodes a tree whose keys checkNode has accepted.
func decode(n *yaml.Node, out any) error { return n.Decode(out) }

// decodeParams decodes a transport's section, whose keys checkNode has
// accepted, into its parameter struct p (a pointer) by the `key` tags, as
// the profiles are: each value is converted by keys.Set, so units and
// ranges of types read the same in both front ends. where is the
// section's dotted key, for messages.
func decodeParams(n *yaml.Node, p any, where string) error {
	return decodeKeys(n, reflect.ValueOf(p).Elem(), where)
}

func decodeKeys(n *yaml.Node, v reflect.Value, where string) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping of keys", n.Line, where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		f, ok := keys.Lookup(v.Type(), k.Value)
		if !ok {
			return fmt.Errorf("line %d: unknown key %q in %s (known keys: %s)", k.Line, k.Value, where, strings.Join(keys.Names(v.Type()), ", "))
		}
		fv, key := v.FieldByIndex(f.Index), join(where, k.Value)
		if keys.IsSection(f.Type) {
			if err := decodeKeys(val, fv, key); err != nil {
				return err
			}
			continue
		}
		var raw any
		if err := val.Decode(&raw); err != nil {
			return fmt.Errorf("line %d: %s: %w", val.Line, key, err)
		}
		if err := keys.Set(fv, raw); err != nil {
			return fmt.Errorf("line %d: %s: %w", val.Line, key, err)
		}
	}
	return nil
}
