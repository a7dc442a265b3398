// Package sim is the deterministic discrete-event fabric simulator. It runs
// the unmodified protocol cores (metaroce, and every other transport with
// an adapter in the transports table) as hosts on a modelled fabric and
// measures what they do: the experiments behind MetaRoCE's published
// claims live as YAML files in configs/experiments/ and run with
// `metaroce sim FILE`.
//
// Layers, bottom up (TestSimLayers keeps them): sim/event (the event
// queue, which is the run's clock) and sim/units (the files' durations
// and sizes); sim/fabric (links, queues, ECN, loss, failures, PFC,
// switches and ECMP, the hosts' NIC side) and sim/workload (the
// applications, behind the Workload and Env interfaces), which know
// nothing of each other; this package, which loads experiments, adapts
// the transports, and runs the fabric, the workload and a transport's
// World together; and sim/report (table, CSV, plots) on top.
//
// The model, in one paragraph (docs/sim.md has the full description):
// virtual time is int64 nanoseconds (verbs.Time); events are ordered by
// (time, scheduling sequence), so a run is a pure function of its
// configuration and seed. Each host runs one transport endpoint for all its
// connections and one NIC port per plane; a port pulls a packet from the
// transport only when its small transmit queue has room, so the transport's
// windows and pacing, not an infinite NIC queue, decide what is sent.
// Switches are output-queued with a finite byte buffer per port (tail drop)
// and ECN marking (a step threshold or RED); they route with an ECMP hash of
// the 5-tuple, so a path's UDP source port picks its route. Links have a
// rate, a propagation delay, random and Gilbert-Elliott loss, and can fail
// and recover; routing reconverges only after a configurable delay (by
// default never within a run), so the endpoints must route around failures
// themselves.
//
// Concurrency: one run is single-threaded and owns everything it touches;
// a sweep runs independent runs on parallel goroutines and orders their
// results by run index, so output never depends on scheduling. Nothing in
// the model reads the wall clock.
package sim
