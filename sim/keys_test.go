package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const minimal = `
experiment: t
topology: {leaves: 2}
workload: {kind: long-lived}
`

func TestUnknownKeyInFile(t *testing.T) {
	_, err := Parse("x.yaml", []byte(minimal+"loss: {rat: 0.1}\n"), nil)
	require.ErrorContains(t, err, "x.yaml")
	require.ErrorContains(t, err, `unknown key "rat" in loss`)
	require.ErrorContains(t, err, "line 5")
	require.ErrorContains(t, err, "rate")

	_, err = Parse("x.yaml", []byte(minimal+"bogus: 1\n"), nil)
	require.ErrorContains(t, err, `unknown key "bogus" at the top level`)

	_, err = Parse("x.yaml", []byte(minimal+"transport: {metaroce: {pathz: 3}}\n"), nil)
	require.ErrorContains(t, err, `unknown key "pathz" in transport.metaroce`)

	_, err = Parse("x.yaml", []byte(minimal+"transport: {quic: {}}\n"), nil)
	require.ErrorContains(t, err, `unknown key "quic" in transport`)

	_, err = Parse("x.yaml", []byte(minimal+"failures: [{plane: 0, att: 1ms}]\n"), nil)
	require.ErrorContains(t, err, `unknown key "att" in failures.0`)
}

func TestSetOverrides(t *testing.T) {
	e, err := Parse("x.yaml", []byte(minimal), []string{"loss.rate=0.02", "topology.spines=8", "transport.metaroce.paths=4"})
	require.NoError(t, err)
	require.Equal(t, 0.02, e.Cfg.Loss.Rate)
	require.Equal(t, 8, e.Cfg.Topology.Spines)
	runs, err := e.Runs()
	require.NoError(t, err)
	require.Equal(t, 4, runs[0].params.(*MetaRoCEParams).Paths)

	_, err = Parse("x.yaml", []byte(minimal), []string{"loss.rat=0.02"})
	require.ErrorContains(t, err, "--set loss.rat=0.02")
	require.ErrorContains(t, err, `unknown key "rat" in loss`)

	_, err = Parse("x.yaml", []byte(minimal), []string{"topology.leaves=many"})
	require.Error(t, err)

	_, err = Parse("x.yaml", []byte(minimal), []string{"noequals"})
	require.ErrorContains(t, err, "key=value")
}

func TestSweepAndSetOnSweptKey(t *testing.T) {
	text := minimal + "sweep:\n  loss.rate: [0, 0.01]\n  topology.spines: [2, 4, 8]\n"
	e, err := Parse("x.yaml", []byte(text), nil)
	require.NoError(t, err)
	runs, err := e.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 6*len(e.Transports))
	require.Equal(t, Row{{"loss.rate", int64(0)}, {"topology.spines", int64(2)}}, runs[0].Params)
	require.Equal(t, 8, runs[len(runs)-1].cfg.Topology.Spines)
	require.Equal(t, 0.01, runs[len(runs)-1].cfg.Loss.Rate)

	// --set on a swept key runs that value only.
	e, err = Parse("x.yaml", []byte(text), []string{"loss.rate=0.05"})
	require.NoError(t, err)
	runs, _ = e.Runs()
	require.Len(t, runs, 3*len(e.Transports))
	require.Equal(t, 0.05, runs[0].cfg.Loss.Rate)

	// sweep.<key> replaces or adds a sweep.
	e, err = Parse("x.yaml", []byte(text), []string{"sweep.topology.spines=[16]", "sweep.workload.connections=[1,2]"})
	require.NoError(t, err)
	runs, _ = e.Runs()
	require.Len(t, runs, 4*len(e.Transports))

	_, err = Parse("x.yaml", []byte(minimal+"sweep: {loss.rat: [1]}\n"), nil)
	require.ErrorContains(t, err, `unknown key "rat" in loss`)
}

func TestValidationNamesTheKey(t *testing.T) {
	for text, want := range map[string]string{
		minimal + "loss: {rate: 2}\n":                                             "loss.rate",
		"workload: {kind: long-lived}\ntopology: {kind: torus}\n":                 "topology.kind",
		"workload: {kind: long-lived}\ntopology: {leaves: 2, ecn: {mode: red}}\n": "topology.ecn",
		"workload: {kind: incast, senders: 5}\ntopology: {leaves: 2}\n":           "workload.senders",
		minimal + "failures: [{at: 1ms}]\n":                                       "failures[0]",
		minimal + "duration: soon\n":                                              "bad duration",
		minimal + "transports: [quic]\n":                                          `unknown transport "quic"`,
	} {
		e, err := Parse("x.yaml", []byte(text), nil)
		if err == nil {
			_, err = e.Execute(Options{})
		}
		require.ErrorContains(t, err, want, text)
	}
}

// The transports' keys are the cores' own (their Config tags), the names a
// profile uses: each decodes into the core's field, is checked by the core
// when the file is loaded, and a misspelled or old name fails with the
// file, the line and the valid keys.
func TestTransportKeysAreTheCores(t *testing.T) {
	text := minimal + `transport:
  metaroce: {path_window: 32, keepalive_interval: 5ms, rnr_retries: 3, no_rate_hints: true}
  rocev2: {mtu: 2048, dcqcn: {cnp_interval: 20us, g: 0.01}}
`
	e, err := Parse("x.yaml", []byte(text), nil)
	require.NoError(t, err)
	runs, err := e.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 2)
	var mp *MetaRoCEParams
	var rp *RoCEv2Params
	for _, r := range runs {
		switch p := r.params.(type) {
		case *MetaRoCEParams:
			mp = p
		case *RoCEv2Params:
			rp = p
		}
	}
	require.NotNil(t, mp)
	require.NotNil(t, rp)
	require.Equal(t, 32, mp.PathWindow)
	require.Equal(t, 5*time.Millisecond, mp.KeepaliveInterval)
	require.Equal(t, 3, mp.RNRRetries)
	require.True(t, mp.NoRateHints)
	require.Zero(t, mp.core(2, 4096, 100).LinkRateBps)
	require.Equal(t, 2048, rp.MTU)
	require.Equal(t, 20*time.Microsecond, rp.DCQCN.CNPInterval)
	require.Equal(t, 0.01, rp.DCQCN.G)

	for body, want := range map[string]string{
		"transport: {metaroce: {path_windwo: 8}}\n":   `line 5: unknown key "path_windwo" in transport.metaroce`,
		"transport: {metaroce: {window: 8}}\n":        `unknown key "window" in transport.metaroce`,
		"transport: {rocev2: {dcqcn: false}}\n":       "transport.rocev2.dcqcn must be a mapping of keys",
		"transport: {rocev2: {cnp_interval: 1us}}\n":  `unknown key "cnp_interval" in transport.rocev2`,
		"transport: {rocev2: {dcqcn: {gg: 1}}}\n":     `unknown key "gg" in transport.rocev2.dcqcn`,
		"transport: {metaroce: {path_window: 300}}\n": "transport.metaroce.path_window = 300, want 1..256",
		"transport: {rocev2: {dcqcn: {g: 2}}}\n":      "transport.rocev2.dcqcn.g = 2",
		"transport: {metaroce: {min_rto: 5}}\n":       "transport.metaroce.min_rto: 5 is not a duration",
		"transport: {metaroce: {planes: 2}}\n":        "transport.metaroce.planes = 2, want at most topology.planes = 1",
	} {
		_, err := Parse("x.yaml", []byte(minimal+body), nil)
		require.ErrorContains(t, err, "x.yaml", body)
		require.ErrorContains(t, err, want, body)
	}
	_, err = Parse("x.yaml", []byte(minimal), []string{"transport.metaroce.path_windwo=8"})
	require.ErrorContains(t, err, `unknown key "path_windwo" in transport.metaroce`)
	require.ErrorContains(t, err, "path_window") // among the known keys
}
