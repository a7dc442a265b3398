package sim

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/metaroce/metaroce/internal/keys"
	"github.com/metaroce/metaroce/verbs"
)

// coreParamsError turns a core's Validate error into a load error that
// names the key of the transport.<name> section: the field's `key` tag in
// cfg (the core's Config type), or its Go name when the field has no key
// because the adapter sets it from the topology or transport.mtu. Other
// errors (and nil) pass through.
func coreParamsError(name string, cfg reflect.Type, err error) error {
	var ce *verbs.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	if k, ok := keys.KeyOf(cfg, ce.Field); ok {
		return fmt.Errorf("transport.%s.%s %s", name, k, ce.Msg)
	}
	return fmt.Errorf("transport.%s: %s %s (from topology or transport.mtu)", name, ce.Field, ce.Msg)
}
