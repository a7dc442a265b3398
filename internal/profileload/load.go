// Package profileload reads a profile the way every metaroce front end
// does: the defaults, then the YAML profile (a file, or the embedded
// default), then the METAROCE_* environment variables (METAROCE_UDP_LOSS for
// udp.loss). The command (cmd/metaroce) applies its flags on top; the verbs
// library (libverbs/golib), which has no flags, uses the result as it is.
// One loader keeps the two front ends reading the same keys the same way.
package profileload

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/viper"

	"github.com/metaroce/metaroce/configs"
	"github.com/metaroce/metaroce/profile"
)

// Loaded is a profile read from its file and the environment.
type Loaded struct {
	// Config is the profile, not yet validated (flags may follow).
	Config profile.Config
	// Name is the file, or the embedded default's name.
	Name string
	// Origin names where a key's value came from when not the file: the
	// environment variable. Callers add their own (--set, flags).
	Origin map[string]string
}

// EnvVar is the environment variable that overrides key.
func EnvVar(key string) string {
	return "METAROCE_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads file (empty: the embedded default profile) and the
// environment. An error is one line naming the key, the variable and the
// file, prefixed "metaroce: ".
func Load(file string) (Loaded, error) {
	l := Loaded{Config: profile.Default(), Name: file, Origin: map[string]string{}}
	v := viper.New()
	v.SetConfigType("yaml")
	var data []byte
	if file == "" {
		l.Name, data = configs.DefaultName+" (embedded)", configs.Default
	} else {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			return l, errf("metaroce: profile %s: %v", l.Name, errors.Unwrap(err))
		}
	}
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return l, errf("metaroce: %s: not a YAML profile: %v", l.Name, err)
	}
	fields := l.Config.Fields()
	keys := v.AllKeys()
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := fields[k]; ok {
			continue
		}
		if profile.IsSection(k) {
			return l, errf("metaroce: %s: key %s: is a section, not a value", l.Name, k)
		}
		return l, errf("metaroce: %s: unknown key %s", l.Name, k)
	}
	for _, k := range keys {
		if err := profile.Set(fields[k], v.Get(k)); err != nil {
			return l, errf("metaroce: %s: key %s: %v", l.Name, k, err)
		}
	}
	// Environment: every key has its variable.
	for k, f := range fields {
		env := EnvVar(k)
		if val, ok := os.LookupEnv(env); ok {
			if err := profile.Set(f, val); err != nil {
				return l, errf("metaroce: %s (key %s, profile %s): %v", env, k, l.Name, err)
			}
			l.Origin[k] = env
		}
	}
	return l, nil
}

// ValidateError is Validate's error as the front ends print it: the file,
// the key, where its value came from when not the file, and what is wrong.
func (l Loaded) ValidateError() error {
	err := l.Config.Validate()
	if err == nil {
		return nil
	}
	var fe *profile.FieldError
	if errors.As(err, &fe) {
		from := ""
		if o := l.Origin[fe.Key]; o != "" {
			from = " (from " + o + ")"
		}
		return errf("metaroce: %s: key %s%s: %s", l.Name, fe.Key, from, fe.Msg)
	}
	return errf("metaroce: %s: %v", l.Name, err)
}

// errf formats a one-line error (YAML parser errors span lines).
func errf(format string, args ...any) error {
	return errors.New(strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "))
}
