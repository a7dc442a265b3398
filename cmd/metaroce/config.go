package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/metaroce/metaroce/configs"
	"github.com/metaroce/metaroce/profile"
)

// configError is a bad profile, environment variable or flag value: the
// command prints it as one line and exits with status 2.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func cfgErr(format string, args ...any) error {
	return &configError{msg: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine folds a multi-line message (YAML parser errors) into one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// configFlags are the flags every command that reads a profile has.
type configFlags struct {
	profile string
	sets    []string
}

func (c *configFlags) register(f *pflag.FlagSet) {
	f.StringVar(&c.profile, "profile", "", "YAML profile (default: the embedded "+configs.DefaultName+")")
	f.StringArrayVar(&c.sets, "set", nil, "override a profile key: key=value (dotted key, lists comma-separated); repeatable")
}

// flagKeys are the flags that stand for profile keys: a flag the user set
// overrides the file and the environment.
var flagKeys = map[string]string{
	"backend":      "backend",
	"transport":    "transport",
	"loss":         "udp.loss",
	"paths":        "metaroce.paths",
	"mtu":          "metaroce.mtu",
	"metrics-addr": "metrics.addr",
	"log-level":    "log.level",
}

// loadConfig builds the one Config a command runs with: defaults, then the
// profile (file, or the embedded default), then METAROCE_* variables
// (METAROCE_UDP_LOSS for udp.loss), then flags (--set and the flags in
// flagKeys). Any unknown key or bad value is a *configError naming the key
// and the file.
func loadConfig(cf configFlags, flags *pflag.FlagSet) (profile.Config, string, error) {
	cfg := profile.Default()
	name := cf.profile
	v := viper.New()
	v.SetConfigType("yaml")
	var data []byte
	if name == "" {
		name, data = configs.DefaultName+" (embedded)", configs.Default
	} else {
		var err error
		if data, err = os.ReadFile(name); err != nil {
			return cfg, name, cfgErr("metaroce: profile %s: %v", name, errors.Unwrap(err))
		}
	}
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return cfg, name, cfgErr("metaroce: %s: not a YAML profile: %v", name, err)
	}
	fields := cfg.Fields()
	keys := v.AllKeys()
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := fields[k]; ok {
			continue
		}
		if profile.IsSection(k) {
			return cfg, name, cfgErr("metaroce: %s: key %s: is a section, not a value", name, k)
		}
		return cfg, name, cfgErr("metaroce: %s: unknown key %s", name, k)
	}
	for _, k := range keys {
		if err := profile.Set(fields[k], v.Get(k)); err != nil {
			return cfg, name, cfgErr("metaroce: %s: key %s: %v", name, k, err)
		}
	}
	// origin names where a key's value came from when not the file.
	origin := map[string]string{}
	// Environment: every key has its variable.
	for k, f := range fields {
		env := "METAROCE_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
		if val, ok := os.LookupEnv(env); ok {
			if err := profile.Set(f, val); err != nil {
				return cfg, name, cfgErr("metaroce: %s (key %s, profile %s): %v", env, k, name, err)
			}
			origin[k] = env
		}
	}
	for _, s := range cf.sets {
		k, val, ok := strings.Cut(s, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		f, known := fields[k]
		if !ok || !known {
			return cfg, name, cfgErr("metaroce: --set %s: unknown key %s (profile %s)", s, k, name)
		}
		if err := profile.Set(f, val); err != nil {
			return cfg, name, cfgErr("metaroce: --set %s (key %s, profile %s): %v", s, k, name, err)
		}
		origin[k] = "--set"
	}
	if flags != nil {
		for fl, k := range flagKeys {
			pf := flags.Lookup(fl)
			if pf == nil || !pf.Changed {
				continue
			}
			if err := profile.Set(fields[k], pf.Value.String()); err != nil {
				return cfg, name, cfgErr("metaroce: --%s (key %s, profile %s): %v", fl, k, name, err)
			}
			origin[k] = "--" + fl
		}
	}
	if err := cfg.Validate(); err != nil {
		var fe *profile.FieldError
		if errors.As(err, &fe) {
			from := ""
			if o := origin[fe.Key]; o != "" {
				from = " (from " + o + ")"
			}
			return cfg, name, cfgErr("metaroce: %s: key %s%s: %s", name, fe.Key, from, fe.Msg)
		}
		return cfg, name, cfgErr("metaroce: %s: %v", name, err)
	}
	if err := checkDPDK(cfg, name); err != nil {
		return cfg, name, err
	}
	return cfg, name, nil
}
