package keys

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type inner struct {
	Rate   float64       `key:"rate"`
	Period time.Duration `key:"period"`
}

type core struct {
	ID     int   // untagged: the program's, not a key
	Window int   `key:"window"`
	Hidden int   `key:"-"`
	Sub    inner `key:"sub"`
}

type front struct {
	core  `key:",inline"`
	Extra bool `key:"extra"`
}

type yamlStyle struct {
	Kind    string `yaml:"kind"`
	Planes  int
	Skipped int               `yaml:"-"`
	Per     map[string]string `yaml:",inline"`
	private int
}

func TestFieldsByKeyTags(t *testing.T) {
	fs := Fields(reflect.TypeOf(front{}))
	var got []string
	for _, f := range fs {
		got = append(got, f.Key+"="+f.Name)
	}
	require.Equal(t, []string{"window=core.Window", "sub=core.Sub", "extra=Extra"}, got)
	f, ok := Lookup(reflect.TypeOf(&front{}), "window")
	require.True(t, ok)
	require.Equal(t, []int{0, 1}, f.Index)
	_, ok = Lookup(reflect.TypeOf(front{}), "id")
	require.False(t, ok, "an untagged field of a key-tagged struct is not a key")
	require.True(t, IsSection(f.Type) == false && IsSection(reflect.TypeOf(inner{})))
}

func TestFieldsByYAMLTags(t *testing.T) {
	require.Equal(t, []string{"kind", "planes"}, Names(reflect.TypeOf(yamlStyle{})))
	_ = yamlStyle{}.private
}

func TestLeavesAreDottedAndSettable(t *testing.T) {
	var c front
	var got []string
	for _, l := range Leaves(reflect.ValueOf(&c), "tr") {
		got = append(got, l.Key+"="+l.Name)
		require.True(t, l.Value.CanSet(), l.Key)
	}
	require.Equal(t, []string{"tr.window=core.Window", "tr.sub.rate=core.Sub.Rate", "tr.sub.period=core.Sub.Period", "tr.extra=Extra"}, got)
	for _, l := range Leaves(reflect.ValueOf(&c), "") {
		if l.Key == "sub.period" {
			require.NoError(t, Set(l.Value, "3us"))
		}
	}
	require.Equal(t, 3*time.Microsecond, c.Sub.Period)
}

func TestKeyOf(t *testing.T) {
	for name, want := range map[string]string{
		"Window": "window", "core.Window": "window", "Sub.Rate": "sub.rate", "Extra": "extra",
	} {
		k, ok := KeyOf(reflect.TypeOf(front{}), name)
		require.True(t, ok, name)
		require.Equal(t, want, k, name)
	}
	for _, name := range []string{"ID", "Hidden", "Nope", "Sub"} {
		_, ok := KeyOf(reflect.TypeOf(front{}), name)
		require.False(t, ok, name)
	}
}

func TestSetConvertsAndChecksRange(t *testing.T) {
	var v struct {
		U8  uint8
		U16 uint16
		I8  int8
		F   float64
		D   time.Duration
		L   []int
	}
	rv := reflect.ValueOf(&v).Elem()
	require.NoError(t, Set(rv.Field(0), 255))
	require.NoError(t, Set(rv.Field(1), "49152"))
	require.NoError(t, Set(rv.Field(2), -128))
	require.NoError(t, Set(rv.Field(3), "5%"))
	require.NoError(t, Set(rv.Field(4), "200us"))
	require.NoError(t, Set(rv.Field(5), "1, 2,3"))
	require.Equal(t, uint8(255), v.U8)
	require.Equal(t, uint16(49152), v.U16)
	require.Equal(t, int8(-128), v.I8)
	require.Equal(t, 0.05, v.F)
	require.Equal(t, 200*time.Microsecond, v.D)
	require.Equal(t, []int{1, 2, 3}, v.L)
	for i, raw := range []any{256, 70000, 200, "x", 5, []any{1, "b"}} {
		err := Set(rv.Field(i), raw)
		require.Error(t, err, "field %d = %v", i, raw)
	}
	err := Set(rv.Field(0), -1)
	require.True(t, err != nil && strings.Contains(err.Error(), "0..255"), "%v", err)
}
