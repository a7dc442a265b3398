// Package configs holds the documented profiles (*.yaml in this folder)
// and embeds the default one into the metaroce binary.
package configs

import _ "embed"

// DefaultName is the embedded default profile's file name.
const DefaultName = "configs/loopback-udp.yaml"

// Default is the content of loopback-udp.yaml, the profile the metaroce
// command uses when given none.
//
//go:embed loopback-udp.yaml
var Default []byte
