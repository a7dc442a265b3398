package profile

import (
	"errors"
	"reflect"

	mr "github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/verbs"
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
	// The link rate is the profile's own key, in Gb/s.
	var ce *verbs.ConfigError
	if errors.As(err, &ce) && ce.Field == "LinkRateBps" {
		return bad("metaroce.link_gbps", "%s (in bit/s)", coreMsg(ce))
	}
	return coreError("metaroce", reflect.TypeOf(mr.Config{}), err)
}
