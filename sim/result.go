package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Field is one named value of a result row. Rows keep their fields in
// order, so JSON output is stable field by field, not just as a set.
type Field struct {
	Key   string
	Value any
}

// Row is one result: one transport at one point of the sweep (an
// experiment may add more rows per run). Values are float64, int, int64,
// uint64, string, bool, nil (JSON null: a figure that does not exist, such
// as a convergence time that never came), []float64 or a nested Row.
type Row []Field

// Get returns the value of key, if the row has it.
func (r Row) Get(key string) (any, bool) {
	for _, f := range r {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Float returns key's value as a float64 (false if absent or not a number).
func (r Row) Float(key string) (float64, bool) {
	v, ok := r.Get(key)
	if !ok {
		return 0, false
	}
	return Number(v)
}

// Number returns a row value as a float64 when it is a number (float64,
// int, int64 or uint64).
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// Set replaces key's value, or adds the field: at the end, but before a
// trailing "series" field, which stays last.
func (r *Row) Set(key string, v any) {
	for i := range *r {
		if (*r)[i].Key == key {
			(*r)[i].Value = v
			return
		}
	}
	n := len(*r)
	if n > 0 && (*r)[n-1].Key == "series" {
		*r = append(*r, (*r)[n-1])
		(*r)[n-1] = Field{key, v}
		return
	}
	*r = append(*r, Field{key, v})
}

// MarshalJSON writes the row as an object with its fields in order.
// Floats are written with at most 6 significant digits (the model is not
// more precise than that, and it keeps lines readable); NaN and Inf, which
// JSON cannot hold, are written as null.
func (r Row) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.Key)
		b.Write(k)
		b.WriteByte(':')
		if err := writeJSONValue(&b, f.Value); err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Key, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSONValue(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case float64:
		b.WriteString(FormatFloat(x))
	case []float64:
		b.WriteByte('[')
		for i, f := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(FormatFloat(f))
		}
		b.WriteByte(']')
	case Row:
		j, err := x.MarshalJSON()
		if err != nil {
			return err
		}
		b.Write(j)
	default:
		j, err := json.Marshal(x)
		if err != nil {
			return err
		}
		b.Write(j)
	}
	return nil
}

// FormatFloat writes f with 6 significant digits, as JSON (and the CSV
// files) show figures.
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	s := strconv.FormatFloat(f, 'g', 6, 64)
	// 'g' may use an exponent; JSON accepts 1e-05 style, but parse and
	// re-format plain numbers in a readable range.
	if v, err := strconv.ParseFloat(s, 64); err == nil && math.Abs(v) >= 1e-4 && math.Abs(v) < 1e15 {
		s = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}
