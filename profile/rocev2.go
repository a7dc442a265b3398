package profile

import (
	"errors"
	"reflect"
	"strings"

	"github.com/metaroce/metaroce/internal/keys"
	"github.com/metaroce/metaroce/rocev2"
)

// validateCore lets the baseline core judge the parameters, and names the
// key: the core reports a field by its Go name, whose key its tag gives.
func (r RoCEv2) validateCore() error {
	err := r.Core().Defaults().Validate()
	if err == nil {
		return nil
	}
	var ce *rocev2.ConfigError
	if errors.As(err, &ce) {
		msg := "is " + strings.TrimPrefix(ce.Msg, "= ")
		if k, ok := keys.KeyOf(reflect.TypeOf(rocev2.Config{}), ce.Field); ok {
			return bad("rocev2."+k, "%s", msg)
		}
		return bad("rocev2", "%s %s", ce.Field, msg)
	}
	return bad("rocev2", "%v", err)
}
