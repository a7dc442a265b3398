package sim_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeTable is the README's table of simulator figures (the "Fabric
// simulator" item of Status), every figure read from the golden
// experiment tables (testdata/experiments/*.txt).
func readmeTable(t *testing.T) string {
	g := map[string]goldenTable{}
	for _, n := range []string{"loss-sweep", "incast", "plane-failure", "plane-scaling", "ecmp-collision", "asymmetry",
		"collectives", "collectives-jumbo", "collectives-channels"} {
		g[n] = readGoldenTable(t, n)
	}
	num := func(r map[string]string, col string) float64 {
		v, err := strconv.ParseFloat(r[col], 64)
		require.NoError(t, err, "%s in %v", col, r)
		return v
	}
	row := func(exp string, kv ...string) map[string]string {
		want := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			want[kv[i]] = kv[i+1]
		}
		return g[exp].find(t, want)
	}
	var b strings.Builder
	line := func(what, m, r string) { b.WriteString(mdRow(what, m, r)) }
	b.WriteString("| experiment | metaroce | RoCEv2 |\n|---|---|---|\n")

	// Loss sweep: efficiency at 1% and 10% loss.
	for _, c := range []struct{ conns, what string }{
		{"1", "loss, 1 connection: efficiency at 1% / 10% loss"}, {"16", "loss, 16 connections: efficiency at 1% / 10%"}} {
		eff := func(tr string) string {
			return row("loss-sweep", "transport", tr, "workload.connections", c.conns, "loss.rate", "0.010")["efficiency"] + " / " +
				row("loss-sweep", "transport", tr, "workload.connections", c.conns, "loss.rate", "0.100")["efficiency"]
		}
		line(c.what, eff("metaroce"), eff("rocev2"))
	}

	// Incast: goodput and Jain from the third base RTT; the receiver's
	// queue after convergence, or its steady queue where it never converges.
	for _, n := range []string{"32", "128"} {
		cell := func(tr string) string {
			r := row("incast", "transport", tr, "workload.senders", n)
			q := r["queue_after_kib"]
			if q == "-" {
				q = r["queue_steady_kib"]
			}
			qk, err := strconv.ParseFloat(q, 64)
			require.NoError(t, err)
			s := fmt.Sprintf("%s Gb/s, %s, %.0f KiB", r["goodput_from3_gbps"], r["jain_from3"], qk)
			if tr == "metaroce" && n == "32" {
				s += fmt.Sprintf(" (BDP %.0f)", num(r, "bdp_kib"))
			}
			return s
		}
		what := "incast " + n + ":1: goodput and Jain from the 3rd base RTT, receiver's queue after convergence (steady queue if it never converges)"
		if n != "32" {
			what = "incast " + n + ":1: same"
		}
		line(what, cell("metaroce"), cell("rocev2"))
	}

	// Plane failure.
	pm, pr := row("plane-failure", "transport", "metaroce"), row("plane-failure", "transport", "rocev2")
	line("1 of 4 planes fails: back to 70% of before; failed work requests",
		fmt.Sprintf("%.1f base RTTs; %s", num(pm, "recover70_rtts"), pm["failed_wrs"]),
		fmt.Sprintf("never below it (%.0f%%: the other planes' QPs carry on), but the failed plane's %s QPs stall for good; %s",
			100*num(pr, "after_gbps")/num(pr, "before_gbps"), pr["stalled_connections"], pr["failed_wrs"]))

	// Plane scaling: goodput with k planes over goodput with one.
	ratios := func(tr string) string {
		one := num(row("plane-scaling", "transport", tr, "topology.planes", "1"), "goodput_gbps")
		var s []string
		for _, k := range []string{"2", "4", "8"} {
			s = append(s, fmt.Sprintf("%.2f", num(row("plane-scaling", "transport", tr, "topology.planes", k), "goodput_gbps")/one))
		}
		return strings.Join(s, " / ")
	}
	line("4,000 connections, 1 → 2 / 4 / 8 planes: goodput ratio", ratios("metaroce"), ratios("rocev2"))

	// ECMP collisions: the range of efficiency over the seeds.
	span := func(tr string) string {
		lo, hi := math.Inf(1), math.Inf(-1)
		n := 0
		for _, r := range g["ecmp-collision"].rows {
			if r["transport"] == tr {
				lo, hi, n = min(lo, num(r, "efficiency")), max(hi, num(r, "efficiency")), n+1
			}
		}
		require.Equal(t, 3, n, "ecmp-collision: three seeds")
		return fmt.Sprintf("%.3f–%.3f", lo, hi)
	}
	line("ECMP: 16 flows each way over 4 spines, fraction of bisection", span("metaroce"), span("rocev2"))

	// Asymmetry: slower, dropping, both (relative to healthy).
	const slow, drop = `{"p0:leaf0-spine5": 0.3}`, `{"p0:leaf0-spine5": 0.5}`
	asym := func(tr, links, loss string) map[string]string {
		return row("asymmetry", "transport", tr, "topology.link_gbps", links, "loss.links", loss)
	}
	eff := func(links, loss string) string { return asym("metaroce", links, loss)["efficiency"] }
	line("one of 32 paths 10× slower / dropping 50% / both (vs healthy)",
		eff(slow, "{}")+" / "+eff("{}", drop)+" / "+eff(slow, drop),
		fmt.Sprintf("(one 3 Gb/s path: %.1f Gb/s)", num(asym("rocev2", "{}", "{}"), "goodput_gbps")))

	// Collectives, completion times in ms.
	ms := func(exp string, kv ...string) string {
		r := row(exp, kv...)
		if r["completion_us"] == "-" {
			return "fails"
		}
		return fmt.Sprintf("%.2f", math.Floor(num(r, "completion_us")/10+0.5)/100)
	}
	coll := func(exp, kind, tr, place, pfc string, more ...string) string {
		return ms(exp, append([]string{"transport", tr, "workload.kind", kind, "workload.placement", place, "topology.pfc.enabled", pfc}, more...)...)
	}
	line("ring all-reduce, 16 ranks × 64 MiB, ranks packed / spread over leaves",
		coll("collectives", "allreduce", "metaroce", "packed", "false")+" / "+coll("collectives", "allreduce", "metaroce", "spread", "false")+" ms",
		coll("collectives", "allreduce", "rocev2", "packed", "false")+" ms / "+coll("collectives", "allreduce", "rocev2", "spread", "false")+
			"; with PFC "+coll("collectives", "allreduce", "rocev2", "packed", "true")+" / "+coll("collectives", "allreduce", "rocev2", "spread", "true")+" ms")
	line("same, 9000-byte frames (metaroce 8 KiB payloads, RoCEv2 4 KiB)",
		coll("collectives-jumbo", "allreduce", "metaroce", "packed", "false")+" / "+coll("collectives-jumbo", "allreduce", "metaroce", "spread", "false")+" ms",
		"as above")
	ch := func(kind, tr, place, pfc, n string) string {
		return coll("collectives-channels", kind, tr, place, pfc, "workload.channels", n)
	}
	line("same over 4 channels (NCCL-style, a connection per channel)",
		ch("allreduce", "metaroce", "packed", "false", "4")+" / "+ch("allreduce", "metaroce", "spread", "false", "4")+" ms",
		ch("allreduce", "rocev2", "packed", "false", "4")+" ms / "+ch("allreduce", "rocev2", "spread", "false", "4")+
			"; with PFC "+ch("allreduce", "rocev2", "packed", "true", "4")+" / "+ch("allreduce", "rocev2", "spread", "true", "4")+" ms")
	a2a := func(tr, place, pfc string) string { return coll("collectives", "all-to-all", tr, place, pfc) }
	fails := func(s string) string {
		if s == "fails" {
			return "fails (retry exceeded)"
		}
		return s + " ms"
	}
	require.Equal(t, a2a("rocev2", "packed", "false"), a2a("rocev2", "spread", "false"), "the README gives one cell for both")
	line("all-to-all, 16 ranks × 64 MiB, packed / spread",
		a2a("metaroce", "packed", "false")+" / "+a2a("metaroce", "spread", "false")+" ms",
		fails(a2a("rocev2", "packed", "false"))+"; with PFC "+a2a("rocev2", "packed", "true")+" / "+a2a("rocev2", "spread", "true")+" ms")
	line("same over 2 / 4 channels, spread",
		ch("all-to-all", "metaroce", "spread", "false", "2")+" / "+ch("all-to-all", "metaroce", "spread", "false", "4")+" ms",
		ch("all-to-all", "rocev2", "spread", "false", "2")+" / "+ch("all-to-all", "rocev2", "spread", "false", "4")+
			" ms; with PFC "+ch("all-to-all", "rocev2", "spread", "true", "2")+" / "+ch("all-to-all", "rocev2", "spread", "true", "4")+" ms")
	return b.String()
}
