package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/metaroce/metaroce/configs"
	"github.com/metaroce/metaroce/internal/profileload"
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
	l, err := profileload.Load(cf.profile)
	cfg, name, origin := l.Config, l.Name, l.Origin
	if err != nil {
		return cfg, name, &configError{msg: err.Error()}
	}
	fields := cfg.Fields()
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
	l.Config = cfg
	if err := l.ValidateError(); err != nil {
		return cfg, name, &configError{msg: err.Error()}
	}
	if err := checkDPDK(cfg, name); err != nil {
		return cfg, name, err
	}
	return cfg, name, nil
}
