package keys

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Set converts raw (a YAML value: string, bool, int, float64, []any; or a
// string from the environment or a flag) into the field f. The error says
// what was wrong with the value, without naming the key.
func Set(f reflect.Value, raw any) error {
	if f.Type() == durationType {
		d, err := toDuration(raw)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("%v is not a string", show(raw))
		}
		f.SetString(s)
	case reflect.Bool:
		switch x := raw.(type) {
		case bool:
			f.SetBool(x)
		case string:
			b, err := strconv.ParseBool(x)
			if err != nil {
				return fmt.Errorf("%q is not true or false", x)
			}
			f.SetBool(b)
		default:
			return fmt.Errorf("%v is not true or false", show(raw))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := toInt(raw)
		if err != nil {
			return err
		}
		if f.OverflowInt(n) {
			return fmt.Errorf("%d is out of range for a %v", n, f.Type())
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := toInt(raw)
		if err != nil {
			return err
		}
		if n < 0 || f.OverflowUint(uint64(n)) {
			return fmt.Errorf("%d is out of range 0..%d", n, uint64(1)<<(8*f.Type().Size())-1)
		}
		f.SetUint(uint64(n))
	case reflect.Float64:
		x, err := toFloat(raw)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Struct:
		return setStruct(f, raw)
	case reflect.Slice:
		items, err := toList(raw)
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(f.Type(), len(items), len(items))
		for i, it := range items {
			if err := Set(s.Index(i), it); err != nil {
				return fmt.Errorf("item %d: %w", i+1, err)
			}
		}
		f.Set(s)
	default:
		return fmt.Errorf("unsupported field kind %v", f.Kind())
	}
	return nil
}

// setStruct fills f, a struct item of a list (dpdk.ports), from a YAML
// map, strictly: a key the struct has no field for is an error naming it.
func setStruct(f reflect.Value, raw any) error {
	m, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("%v is not a map of keys", show(raw))
	}
	t := f.Type()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i := 0
		for ; i < t.NumField(); i++ {
			if strings.EqualFold(t.Field(i).Tag.Get(Tag), k) {
				break
			}
		}
		if i == t.NumField() {
			var known []string
			for j := 0; j < t.NumField(); j++ {
				known = append(known, t.Field(j).Tag.Get(Tag))
			}
			return fmt.Errorf("unknown key %s (one of %s)", k, strings.Join(known, ", "))
		}
		if err := Set(f.Field(i), m[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func show(raw any) string {
	if s, ok := raw.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(raw)
}

func toInt(raw any) (int64, error) {
	switch x := raw.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large", x)
		}
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, fmt.Errorf("%v is not a whole number", x)
		}
		return int64(x), nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a whole number", x)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v is not a whole number", show(raw))
}

func toFloat(raw any) (float64, error) {
	switch x := raw.(type) {
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		s := strings.TrimSpace(x)
		pct := strings.HasSuffix(s, "%")
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", x)
		}
		if pct {
			v /= 100
		}
		return v, nil
	}
	return 0, fmt.Errorf("%v is not a number", show(raw))
}

func toDuration(raw any) (time.Duration, error) {
	switch x := raw.(type) {
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (like 500ms, 2s)", x)
		}
		return d, nil
	case int:
		if x == 0 {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("%v is not a duration (like 500ms, 2s; units are required)", show(raw))
}

// toList accepts a YAML list or a comma-separated string ("0,0.01").
func toList(raw any) ([]any, error) {
	switch x := raw.(type) {
	case []any:
		return x, nil
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, nil
	case string:
		s := strings.Trim(strings.TrimSpace(x), "[]")
		if s == "" {
			return nil, nil
		}
		parts := strings.Split(s, ",")
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = strings.TrimSpace(p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v is not a list", show(raw))
}
