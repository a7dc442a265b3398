package profile

import (
	"reflect"

	"github.com/metaroce/metaroce/rocev2"
)

// validateCore lets the baseline core judge the parameters, and names the
// key: the core reports a field by its Go name, whose key its tag gives.
func (r RoCEv2) validateCore() error {
	err := r.Core().Defaults().Validate()
	if err == nil {
		return nil
	}
	return coreError("rocev2", reflect.TypeOf(rocev2.Config{}), err)
}
