package profile

import (
	"errors"
	"reflect"
	"strings"

	"github.com/metaroce/metaroce/internal/keys"
	"github.com/metaroce/metaroce/verbs"
)

// coreError turns a core's Validate error (non-nil) into a profile error
// that names the key of section: the field's `key` tag in cfg (the core's
// Config type), or the section and the Go name when the field has none.
func coreError(section string, cfg reflect.Type, err error) error {
	var ce *verbs.ConfigError
	if !errors.As(err, &ce) {
		return bad(section, "%v", err)
	}
	if k, ok := keys.KeyOf(cfg, ce.Field); ok {
		return bad(section+"."+k, "%s", coreMsg(ce))
	}
	return bad(section, "%s %s", ce.Field, coreMsg(ce))
}

// coreMsg is the core's message as a profile error reads it ("is 0, want
// ...": the core writes "= 0, want ...").
func coreMsg(ce *verbs.ConfigError) string { return "is " + strings.TrimPrefix(ce.Msg, "= ") }
