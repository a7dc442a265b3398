package verbs

import (
	"reflect"
	"testing"
)

// ssaFits mirrors the Go compiler's rule for keeping a struct in
// registers (cmd/compile's CanSSA: at most four fields, each of them
// such a type, arrays of at most one element, and 32 bytes in all on
// amd64). A struct that breaks it lives in memory: built there with
// narrow stores, and copied with wide loads that stall on them at every
// call that returns it.
func ssaFits(t reflect.Type) bool {
	if t.Size() > 32 {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		if t.NumField() > 4 {
			return false
		}
		for i := range t.NumField() {
			if !ssaFits(t.Field(i).Type) {
				return false
			}
		}
	case reflect.Array:
		return t.Len() <= 1 && (t.Len() == 0 || ssaFits(t.Elem()))
	}
	return true
}

// TestPerPacketMetaFitsRegisters: TxMeta and RxMeta pass through several
// calls per packet in both cores and every backend; they must stay
// register-sized (docs/architecture.md, "Per-packet code").
func TestPerPacketMetaFitsRegisters(t *testing.T) {
	for _, v := range []any{TxMeta{}, RxMeta{}, TxRoute{}} {
		if ty := reflect.TypeOf(v); !ssaFits(ty) {
			t.Errorf("%s: %d fields, %d bytes: more than the compiler keeps in registers", ty, ty.NumField(), ty.Size())
		}
	}
	// The rule itself, on shapes it must refuse.
	type five struct{ _, _, _, _, _ uint8 }
	type mac struct{ _ [6]byte }
	for _, v := range []any{five{}, mac{}, [40]byte{}} {
		if ssaFits(reflect.TypeOf(v)) {
			t.Errorf("%T judged register-sized", v)
		}
	}
}
