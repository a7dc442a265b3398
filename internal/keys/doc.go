// Package keys is the one walker of configuration keys. A configuration
// struct names its keys with `key:"name"` struct tags (a tag needs no
// import, so the sans-I/O cores tag their own Config structs); a nested
// struct is a section whose keys are dotted below its name, and
// `key:",inline"` lifts an embedded struct's keys to the embedding level.
// Both front ends derive their keys from the same tags: the command's
// profiles (profile/) and the simulator's experiment files (sim/), so a
// core parameter has one name everywhere.
//
// The experiment file's own structs are decoded by yaml.v3 and carry
// `yaml` tags instead: a struct none of whose fields has a `key` tag is
// named as yaml.v3 names it, so one walker checks the whole experiment
// schema.
//
// Standard library and reflect only; nothing here is used on a hot path.
package keys
