package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/metaroce/metaroce/profile"
)

type benchOpts struct {
	cf       configFlags
	pcap     string
	pcapMax  int
	progress string
	backend  string
	metrics  string
	logLevel string
	loss     float64
	paths    int
	mtu      int
	eal      []string // after "--": EAL arguments (backend dpdk)
}

func newBenchCmd() *cobra.Command {
	o := benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench [PROFILE]",
		Short: "A/B: metaroce against rocev2 over the same backend, sweeping what the profile names",
		Long: `bench runs the profile's bench.test (write_bw, send_bw or read_bw) between two
endpoints of this machine over the profile's backend, once per transport
(bench.transports) for every point of the sweep (the cross product of
bench.sweep.loss, .size, .paths and .qps), prints a side-by-side table and
writes a PNG plot of goodput against the swept parameter (bench.plot).

Each point runs the same code as metaroce perf (TCP setup aside): the
server and the client are two nodes in this process, each on its own
goroutine and its own address (udp.server_ip, udp.client_ip). Loss is
injected on both receive paths (data and acknowledgements alike).

  metaroce bench                               # the embedded default profile
  metaroce bench configs/loopback-udp.yaml --set bench.sweep.loss=0,0.001,0.01

With backend: dpdk both nodes run in this process on two DPDK ports of one
EAL (dpdk.ports[0] the server, dpdk.ports[1] the client; a memif pair in
configs/memif-pair.yaml), and loss is injected by the engine's receive
impairment stage on both ports (bench.sweep.loss, else dpdk.impair.loss).
EAL arguments given after "--" follow the profile's dpdk.eal.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if pos, _ := splitDash(cmd, args); len(pos) > 1 {
				return &usageError{msg: fmt.Sprintf("bench: want at most one PROFILE (then -- EAL args), got %d arguments before --", len(pos))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			args, o.eal = splitDash(cmd, args)
			if len(args) == 1 {
				if o.cf.profile != "" && o.cf.profile != args[0] {
					return &usageError{msg: "bench: give the profile once (argument or --profile)"}
				}
				o.cf.profile = args[0]
			}
			return runBench(cmd, o)
		},
	}
	f := cmd.Flags()
	o.cf.register(f)
	f.StringVar(&o.pcap, "pcap", "", "write every packet both endpoints send and receive to this pcap file")
	f.IntVar(&o.pcapMax, "pcap-max", 100000, "packets --pcap records at most")
	f.StringVar(&o.progress, "progress", "auto", "progress on stderr: auto (when stderr is a terminal), always, never")
	f.StringVar(&o.backend, "backend", "", "udp or dpdk (default: the profile's backend)")
	f.StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics on host:port (metrics.addr)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn, error (log.level)")
	f.Float64Var(&o.loss, "loss", 0, "injected loss for every point (udp.loss; bench.sweep.loss replaces it)")
	f.IntVar(&o.paths, "paths", 0, "metaroce paths (metaroce.paths; bench.sweep.paths replaces it)")
	f.IntVar(&o.mtu, "mtu", 0, "metaroce payload bytes per packet (metaroce.mtu)")
	return cmd
}

// benchPoint is one point of the sweep.
type benchPoint struct {
	Loss  float64
	Size  int
	Paths int
	QPs   int
}

// benchCell is one transport's result at one point.
type benchCell struct {
	res      perfResult
	resent   uint64 // data packets sent again (client and server)
	data     uint64 // data packets sent the first time
	injected uint64 // packets the impairment stage dropped
	err      error
}

func (c benchCell) goodputGbps() float64 { return c.res.BWAvg * 8 / 1e9 }

func sweepPoints(s profile.Sweep, cfg profile.Config) []benchPoint {
	or := func(v []int, d int) []int {
		if len(v) == 0 {
			return []int{d}
		}
		return v
	}
	loss := s.Loss
	if len(loss) == 0 {
		loss = []float64{cfg.UDP.Loss}
		if cfg.Backend == profile.BackendDPDK {
			loss = []float64{cfg.DPDK.Impair.Loss}
		}
	}
	var pts []benchPoint
	for _, l := range loss {
		for _, sz := range or(s.Size, 65536) {
			for _, p := range or(s.Paths, cfg.Metaroce.Paths) {
				for _, q := range or(s.QPs, 1) {
					pts = append(pts, benchPoint{Loss: l, Size: sz, Paths: p, QPs: q})
				}
			}
		}
	}
	return pts
}

func runBench(cmd *cobra.Command, o benchOpts) error {
	cfg, name, err := loadConfig(o.cf, cmd.Flags())
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	log, err := newLogger(cfg.Log.Level, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	var dh *dpdkHost
	var sip, cip netip.Addr
	if cfg.Backend == profile.BackendDPDK {
		if o.pcap != "" {
			return &usageError{msg: "bench: --pcap records the udp backend; with backend dpdk capture on a tap or NIC mirror instead"}
		}
		if dh, err = startDPDK(cfg, o.eal, true, stderr); err != nil {
			return err
		}
		defer func() {
			if err := dh.shutdown(); err != nil {
				log.Sugar().Warnw("dpdk shutdown", "err", err)
			}
		}()
	} else {
		if len(o.eal) > 0 {
			return &usageError{msg: fmt.Sprintf("bench: arguments after -- are EAL arguments, for backend dpdk (backend is %s)", cfg.Backend)}
		}
		var err1, err2 error
		sip, err1 = netip.ParseAddr(cfg.UDP.ServerIP)
		cip, err2 = netip.ParseAddr(cfg.UDP.ClientIP)
		if err1 != nil || err2 != nil || sip == cip {
			return cfgErr("metaroce: %s: key udp.server_ip/udp.client_ip: bench needs two different addresses of this machine (got %q and %q)",
				name, cfg.UDP.ServerIP, cfg.UDP.ClientIP)
		}
	}
	stop, release := sigStop()
	defer release()
	var met *metricsServer
	if cfg.Metrics.Addr != "" {
		if met, err = startMetrics(cfg.Metrics.Addr, log); err != nil {
			return err
		}
		defer met.close()
	}
	capture, closeCapture, err := pcapCapture(o.pcap, o.pcapMax)
	if err != nil {
		return err
	}
	b := cfg.Bench
	pts := sweepPoints(b.Sweep, cfg)
	prog := progressOn(o.progress, stderr)
	per := "iterations " + fmt.Sprint(b.Iterations)
	if b.Duration > 0 {
		per = b.Duration.String()
	}
	fmt.Fprintf(stdout, "metaroce bench: %s, profile %s, backend %s, %s per point, %s vs %s\n", b.Test, name, cfg.Backend, per,
		b.Transports[0], b.Transports[len(b.Transports)-1])
	cells := make([][]benchCell, len(pts))
	var runErr error
	started := time.Now()
points:
	for i, pt := range pts {
		for _, tr := range b.Transports {
			if prog {
				fmt.Fprintf(stderr, "  [%d/%d] %s: loss %g, %d B, %d paths, %d QPs (%.0fs so far)\n", i+1, len(pts), tr, pt.Loss,
					pt.Size, pt.Paths, pt.QPs, time.Since(started).Seconds())
			}
			cell := benchRun(cfg, profile.Transport(tr), pt, dh, sip, cip, stop, capture, met)
			cells[i] = append(cells[i], cell)
			var wf *wrFailure
			if errors.As(cell.err, &wf) {
				// The transport gave up (a result): on to the next point.
				fmt.Fprintf(stderr, "metaroce: %v\n", cell.err)
				continue
			}
			if cell.err != nil {
				runErr = cell.err
				break points
			}
		}
	}
	if cerr := closeCapture(); cerr != nil && runErr == nil {
		runErr = cerr
	}
	printPerfTables(stdout, cfg, b, pts, cells)
	printBenchTable(stdout, b, pts, cells)
	if file, err := writeBenchPlot(b, pts, cells); err != nil {
		if runErr == nil {
			runErr = err
		}
	} else if file != "" {
		fmt.Fprintf(stdout, "plot: %s\n", file)
	}
	if errors.Is(runErr, errInterrupted) {
		fmt.Fprintln(stdout, "(interrupted: the last point is partial, later points did not run)")
	}
	return runErr
}

// benchRun runs one transport at one point: a server node on its own
// goroutine, the client on this one, the setup over channels.
func benchRun(cfg profile.Config, tr profile.Transport, pt benchPoint, dh *dpdkHost, sip, cip netip.Addr, stop func() bool, capture func(*node), met *metricsServer) benchCell {
	cfg.UDP.Loss = pt.Loss
	cfg.DPDK.Impair.Loss = pt.Loss
	srvOpen, cliOpen := udpOpener(cfg, sip), udpOpener(cfg, cip)
	if dh != nil {
		srvOpen, cliOpen = dh.opener(cfg), dh.opener(cfg)
	}
	cfg.Metaroce.Paths = pt.Paths
	b := cfg.Bench
	p := perfParams{Test: b.Test, Transport: tr, Sizes: []int{pt.Size}, Iters: b.Iterations, Duration: b.Duration,
		QPs: pt.QPs, TxDepth: cfg.Perf.TxDepth, RxDepth: cfg.Perf.RxDepth, Paths: pt.Paths}
	cc, sc := chanPair()
	var clientGone atomic.Bool
	srvStop := func() bool { return clientGone.Load() }
	hook := func(n *node) {
		if capture != nil {
			capture(n)
		}
	}
	type srvOut struct {
		n   *node
		err error
	}
	srvDone := make(chan srvOut, 1)
	go func() {
		hello, err := waitMsg(sc, nil, "hello", setupTimeout, srvStop)
		if err != nil {
			srvDone <- srvOut{nil, err}
			return
		}
		_, n, err := serve(cfg, sc, hello, srvOpen, srvStop, hook)
		srvDone <- srvOut{n, err}
	}()
	clientHook := func(n *node) {
		hook(n)
		if met != nil {
			met.watch(n, string(tr))
		}
	}
	res, n, err := runClient(cfg, p, cc, cliOpen, stop, nil, clientHook)
	if err != nil {
		clientGone.Store(true)
	}
	so := <-srvDone
	cell := benchCell{err: err}
	if len(res) > 0 {
		cell.res = res[0]
	}
	for _, nd := range []*node{n, so.n} {
		if nd == nil {
			continue
		}
		for _, c := range nd.snapshot() {
			cell.resent += c.DataResent
			cell.data += c.DataPackets
		}
		cell.injected += nd.be.Stats().RxInjectedDrops
		nd.close()
	}
	if cell.err == nil && so.err != nil {
		cell.err = fmt.Errorf("server: %w", so.err)
	}
	if cell.err != nil && !errors.Is(cell.err, errInterrupted) {
		cell.err = fmt.Errorf("%s at loss %g, %d B, %d paths, %d QPs: %w", tr, pt.Loss, pt.Size, pt.Paths, pt.QPs, cell.err)
	}
	return cell
}

func printBenchTable(w io.Writer, b profile.Bench, pts []benchPoint, cells [][]benchCell) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "loss\tsize[B]\tpaths\tqps\t"
	for _, t := range b.Transports {
		head += t + " Gb/s\t" + t + " resent\t"
	}
	if len(b.Transports) == 2 {
		head += b.Transports[0] + "/" + b.Transports[1] + "\t"
	}
	fmt.Fprintln(tw, head)
	for i, pt := range pts {
		if len(cells[i]) == 0 {
			continue
		}
		row := fmt.Sprintf("%g%%\t%d\t%d\t%d\t", pt.Loss*100, pt.Size, pt.Paths, pt.QPs)
		for j := range b.Transports {
			if j >= len(cells[i]) {
				row += "-\t-\t"
				continue
			}
			c := cells[i][j]
			mark := ""
			if c.res.Partial {
				mark = "*"
			}
			if c.err != nil && !c.res.Partial {
				row += "failed\t" + strconv.FormatUint(c.resent, 10) + "\t"
				continue
			}
			row += fmt.Sprintf("%.3f%s\t%d\t", c.goodputGbps(), mark, c.resent)
		}
		if len(b.Transports) == 2 && len(cells[i]) == 2 && cells[i][0].err == nil && cells[i][1].err == nil && cells[i][1].goodputGbps() > 0 {
			row += fmt.Sprintf("%.2fx\t", cells[i][0].goodputGbps()/cells[i][1].goodputGbps())
		} else if len(b.Transports) == 2 {
			row += "-\t"
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintln(w, "Gb/s: goodput (payload of completed messages over the run, 10^9 bit/s); resent: data packets sent again, both ends;")
	fmt.Fprintln(w, "failed: a work request completed in error (the transport gave up, e.g. RoCEv2 out of retries); * partial")
}

// printPerfTables prints, per transport, the perftest table of every point
// (Gb/sec, as perftest --report_gbits), so a run reads like perftest's.
func printPerfTables(w io.Writer, cfg profile.Config, b profile.Bench, pts []benchPoint, cells [][]benchCell) {
	for j, t := range b.Transports {
		fmt.Fprintln(w, resultLine)
		fmt.Fprintf(w, "                    %s (%s, backend %s)\n", testTitle[b.Test], t, cfg.Backend)
		fmt.Fprintln(w, resultLine)
		fmt.Fprintln(w, resultFmtG+"   loss   paths")
		for i, pt := range pts {
			if j >= len(cells[i]) {
				continue
			}
			c := cells[i][j]
			if c.err != nil && !c.res.Partial {
				fmt.Fprintf(w, " %-7d    failed: %v\n", pt.Size, c.err)
				continue
			}
			r := c.res
			paths := pt.Paths
			if transportKinds[profile.Transport(t)].OnePath {
				paths = 1 // a RoCEv2 QP has one UDP source port
			}
			fmt.Fprintf(w, reportFmt+"   %-5s  %d\n", r.Size, r.Iters, bwUnit(r.BWPeak, true), bwUnit(r.BWAvg, true), r.MsgRate/1e6,
				fmt.Sprintf("%g%%", pt.Loss*100), paths)
		}
		fmt.Fprintln(w, resultLine)
	}
	fmt.Fprintln(w)
}
