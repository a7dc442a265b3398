package keys

import (
	"reflect"
	"strings"
	"time"
)

// Tag is the struct tag that names a configuration key.
const Tag = "key"

// A Field is one key of a struct type, at one level (sections are not
// expanded; inline structs are).
type Field struct {
	// Key is the field's key at this level ("path_window").
	Key string
	// Name is the Go name, dotted through inline structs
	// ("Config.PathWindow"), and Index the path for FieldByIndex.
	Name  string
	Index []int
	Type  reflect.Type
}

// Fields lists the keys of struct type t in declaration order. A struct
// any of whose fields has a `key` tag names its keys by those tags alone
// (an untagged field, or `key:"-"`, is not a key); any other struct is
// named as yaml.v3 would decode it (the `yaml` tag's name, else the
// lower-cased Go name; unexported, "-" and inline non-struct fields are
// not keys).
func Fields(t reflect.Type) []Field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Field
	tagged := usesKeyTags(t)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() && !(sf.Anonymous && tagged) {
			continue // an embedded struct's exported fields are reachable
		}
		name, inline, ok := fieldKey(sf, tagged)
		if !ok {
			continue
		}
		if inline {
			if sf.Type.Kind() != reflect.Struct {
				continue // an inline map (yaml's catch-all) has no fixed keys
			}
			for _, f := range Fields(sf.Type) {
				f.Name = sf.Name + "." + f.Name
				f.Index = append([]int{i}, f.Index...)
				out = append(out, f)
			}
			continue
		}
		out = append(out, Field{Key: name, Name: sf.Name, Index: []int{i}, Type: sf.Type})
	}
	return out
}

func usesKeyTags(t reflect.Type) bool {
	for i := 0; i < t.NumField(); i++ {
		if _, ok := t.Field(i).Tag.Lookup(Tag); ok {
			return true
		}
	}
	return false
}

// fieldKey returns sf's key, whether it is inline, and whether it is a key.
func fieldKey(sf reflect.StructField, tagged bool) (string, bool, bool) {
	tag, has := sf.Tag.Lookup(Tag)
	if !tagged {
		tag, has = sf.Tag.Lookup("yaml")
		if !has {
			return strings.ToLower(sf.Name), false, true
		}
	}
	if !has || tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if opts == "inline" {
		return "", true, true
	}
	if name == "" {
		if tagged {
			return "", false, false
		}
		name = strings.ToLower(sf.Name)
	}
	return name, false, true
}

// Lookup returns the field of struct type t under key k (one level).
func Lookup(t reflect.Type, k string) (Field, bool) {
	for _, f := range Fields(t) {
		if f.Key == k {
			return f, true
		}
	}
	return Field{}, false
}

// Names lists the keys of struct type t at one level, in declaration order.
func Names(t reflect.Type) []string {
	var ns []string
	for _, f := range Fields(t) {
		ns = append(ns, f.Key)
	}
	return ns
}

var durationType = reflect.TypeOf(time.Duration(0))

// IsSection reports whether a field of type t is a section (a struct of
// keys) rather than a value. Lists and maps are values here: the
// experiment walker in sim/ descends into them itself.
func IsSection(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && len(Fields(t)) > 0
}

// A Leaf is one dotted key of a value, with its field.
type Leaf struct {
	Key  string // dotted from the walked root: "dcqcn.cnp_interval"
	Name string // the Go path from the root: "DCQCN.CNPInterval"
	// Value is the field, settable when the root was reached through a
	// pointer.
	Value reflect.Value
}

// Leaves lists every leaf key under struct value v (sections expanded),
// in declaration order, each dotted below prefix.
func Leaves(v reflect.Value, prefix string) []Leaf {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []Leaf
	for _, f := range Fields(v.Type()) {
		k := f.Key
		if prefix != "" {
			k = prefix + "." + k
		}
		fv := v.FieldByIndex(f.Index)
		if IsSection(f.Type) && f.Type.Kind() == reflect.Struct {
			for _, l := range Leaves(fv, k) {
				l.Name = f.Name + "." + l.Name
				out = append(out, l)
			}
			continue
		}
		out = append(out, Leaf{Key: k, Name: f.Name, Value: fv})
	}
	return out
}

// KeyOf returns the dotted key of the field whose Go path from struct type
// t is name ("PathWindow", "DCQCN.CNPInterval"; inline structs may be
// left out of the path), so that an error a core reports by field name
// can name the key instead.
func KeyOf(t reflect.Type, name string) (string, bool) {
	for _, l := range Leaves(reflect.New(derefType(t)), "") {
		if l.Name == name || stripInline(t, l.Name) == name {
			return l.Key, true
		}
	}
	return "", false
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// stripInline drops the names of inline structs from a Go path.
func stripInline(t reflect.Type, name string) string {
	t = derefType(t)
	var kept []string
	for _, part := range strings.Split(name, ".") {
		sf, ok := t.FieldByName(part)
		if !ok {
			return name
		}
		if tag := sf.Tag.Get(Tag); !strings.HasSuffix(tag, ",inline") {
			kept = append(kept, part)
		}
		t = derefType(sf.Type)
	}
	return strings.Join(kept, ".")
}
