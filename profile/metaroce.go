package profile

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/metaroce/metaroce/internal/keys"
	mr "github.com/metaroce/metaroce/metaroce"
)

// Core returns the protocol core's configuration for these parameters
// (zero fields take the core's defaults). The caller sets the identity
// (Node, Incarnation), AcceptIncoming and the queue depths.
func (m Metaroce) Core() mr.Config {
	c := m.Config
	c.LinkRateBps = m.LinkGbps * 1e9
	return c
}

// validateCore lets the core judge the parameters, and names the key: the
// core reports a field by its Go name, whose key its tag gives.
func (m Metaroce) validateCore() error {
	err := m.Core().Defaults().Validate()
	if err == nil {
		return nil
	}
	var ce *mr.ConfigError
	if errors.As(err, &ce) {
		msg := "is " + strings.TrimPrefix(ce.Msg, "= ")
		if ce.Field == "LinkRateBps" {
			return bad("metaroce.link_gbps", "%s (in bit/s)", msg)
		}
		if k, ok := keys.KeyOf(reflect.TypeOf(mr.Config{}), ce.Field); ok {
			return bad("metaroce."+k, "%s", msg)
		}
		return bad("metaroce", "%s %s", ce.Field, msg)
	}
	return bad("metaroce", "%v", fmt.Sprint(err))
}
