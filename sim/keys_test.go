package sim

import (
	"testing"

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
