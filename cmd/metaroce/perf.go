package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/profile"
)

var perfTests = []string{"write_bw", "send_bw", "read_bw", "write_lat", "send_lat", "read_lat"}

type perfOpts struct {
	cf         configFlags
	size       int
	iters      int
	duration   int
	all        bool
	qps        int
	bidir      bool
	port       int
	txDepth    int
	gbits      bool
	outJSON    bool
	jsonFile   string
	pcap       string
	pcapMax    int
	progress   string
	transport  string
	backend    string
	loss       float64
	paths      int
	mtu        int
	metrics    string
	logLevel   string
	setupLimit time.Duration
	verify     bool
	eal        []string // after "--": EAL arguments (backend dpdk)
}

// splitDash splits a command's arguments at "--": what comes after are EAL
// arguments for the DPDK backend (metaroce perf write_bw [flags] -- -a ...).
func splitDash(cmd *cobra.Command, args []string) (pos, eal []string) {
	if i := cmd.ArgsLenAtDash(); i >= 0 {
		return args[:i], args[i:]
	}
	return args, nil
}

func newPerfCmd() *cobra.Command {
	o := perfOpts{}
	cmd := &cobra.Command{
		Use:   "perf TEST [SERVER] [flags] [-- EAL args]",
		Short: "perftest-style tools: write_bw send_bw read_bw write_lat send_lat read_lat",
		Long: `perf runs one of perftest's tests over the profile's backend, with perftest's
flags and output. Start the server without a host, then the client with the
server's address; the two set up over TCP (port 18515, -p) as perftest does.

  metaroce perf write_bw                         # server
  metaroce perf write_bw 127.0.0.1 -s 65536 -D 5 # client
  metaroce perf send_lat --transport rocev2      # the RoCEv2 baseline, server
  metaroce perf send_lat --transport rocev2 127.0.0.1

Both ends must run the same test and transport. The client prints the
result; the server prints the same table when the client reports it.

With backend: dpdk (configs/memif-pair.yaml, configs/two-hosts-dpdk.yaml)
the data path is the DPDK engine; the profile's dpdk.eal arguments are
followed by those given after "--":

  metaroce perf write_bw --profile configs/two-hosts-dpdk.yaml -- -a 0000:3b:00.0`,
		Args: func(cmd *cobra.Command, args []string) error {
			pos, _ := splitDash(cmd, args)
			if len(pos) < 1 || len(pos) > 2 {
				return &usageError{msg: fmt.Sprintf("perf: want TEST [SERVER] (then -- EAL args), got %d arguments before --", len(pos))}
			}
			return nil
		},
		ValidArgs: perfTests,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, o.eal = splitDash(cmd, args)
			if !slices.Contains(perfTests, args[0]) {
				return &usageError{msg: fmt.Sprintf("perf: unknown test %q (one of %v)", args[0], perfTests)}
			}
			host := ""
			if len(args) == 2 {
				host = args[1]
			}
			return runPerf(cmd, o, args[0], host)
		},
	}
	f := cmd.Flags()
	o.cf.register(f)
	f.IntVarP(&o.size, "size", "s", 0, "message size in bytes (default 65536 for BW tests, 2 for latency tests)")
	f.IntVarP(&o.iters, "iters", "n", 0, "iterations per QP (default 5000 for BW tests, 1000 for latency tests)")
	f.IntVarP(&o.duration, "duration", "D", 0, "run for this many seconds instead of -n iterations")
	f.BoolVarP(&o.all, "all", "a", false, "run every size from 2 to 2^23 bytes")
	f.IntVarP(&o.qps, "qp", "q", 1, "number of queue pairs")
	f.BoolVarP(&o.bidir, "bidirectional", "b", false, "measure bidirectional bandwidth (BW tests)")
	f.IntVarP(&o.port, "port", "p", 0, "TCP port of the setup exchange (default perf.tcp_port, 18515)")
	f.IntVarP(&o.txDepth, "tx-depth", "t", 0, "outstanding work requests per QP (default perf.tx_depth, 128)")
	f.BoolVar(&o.gbits, "report_gbits", false, "report bandwidth in Gb/sec instead of MB/sec")
	f.BoolVar(&o.outJSON, "out_json", false, "also write the result as JSON (--out_json_file)")
	f.StringVar(&o.jsonFile, "out_json_file", "perftest_out.json", "file --out_json writes")
	f.StringVar(&o.pcap, "pcap", "", "write every packet this end sends and receives to this pcap file")
	f.IntVar(&o.pcapMax, "pcap-max", 100000, "packets --pcap records at most")
	f.StringVar(&o.progress, "progress", "auto", "progress on stderr: auto (when stderr is a terminal), always, never")
	f.StringVar(&o.transport, "transport", "", "metaroce or rocev2 (default: the profile's transport)")
	f.StringVar(&o.backend, "backend", "", "udp or dpdk (default: the profile's backend)")
	f.Float64Var(&o.loss, "loss", 0, "injected receive-path loss, 0..1 (udp.loss)")
	f.IntVar(&o.paths, "paths", 0, "metaroce paths per connection (metaroce.paths)")
	f.IntVar(&o.mtu, "mtu", 0, "metaroce payload bytes per packet (metaroce.mtu)")
	f.StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics on host:port (metrics.addr)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn, error (log.level)")
	f.BoolVar(&o.verify, "verify", false, "fill every message with a pattern and check every byte where it lands; exit non-zero at the first wrong one (BW tests, one size, one direction)")
	f.DurationVar(&o.setupLimit, "wait", 0, "server: give up when no client came within this long (0: wait forever)")
	return cmd
}

// sigStop returns a stop function that turns true on SIGINT or SIGTERM,
// and the function that stops listening.
func sigStop() (func() bool, func()) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return func() bool { return ctx.Err() != nil }, cancel
}

func progressOn(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if f, ok := w.(*os.File); ok {
		return term.IsTerminal(int(f.Fd()))
	}
	return false
}

func runPerf(cmd *cobra.Command, o perfOpts, test, host string) error {
	cfg, _, err := loadConfig(o.cf, cmd.Flags())
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	log, err := newLogger(cfg.Log.Level, stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	p := perfParams{Test: test, Transport: cfg.Transport, QPs: o.qps, Bidir: o.bidir, TxDepth: cfg.Perf.TxDepth,
		RxDepth: cfg.Perf.RxDepth, Paths: cfg.Metaroce.Paths, Duration: time.Duration(o.duration) * time.Second,
		Verify: o.verify}
	if o.txDepth > 0 {
		p.TxDepth = o.txDepth
	}
	if p.isLat() {
		p.TxDepth = 1
	}
	if o.qps < 1 || o.qps > 64 {
		return &usageError{msg: fmt.Sprintf("perf: -q %d: want 1..64", o.qps)}
	}
	if o.duration < 0 {
		return &usageError{msg: "perf: -D must be positive"}
	}
	if p.isLat() && (o.qps != 1 || o.bidir) {
		return &usageError{msg: "perf: latency tests run one QP, one direction (no -q, no -b)"}
	}
	switch {
	case o.all:
		for s := 2; s <= 1<<23; s *= 2 {
			p.Sizes = append(p.Sizes, s)
		}
	case o.size > 0:
		p.Sizes = []int{o.size}
	case p.isLat():
		p.Sizes = []int{2}
	default:
		p.Sizes = []int{65536}
	}
	if o.size < 0 || o.size > 1<<23 {
		return &usageError{msg: fmt.Sprintf("perf: -s %d: want 1..8388608", o.size)}
	}
	p.Iters = o.iters
	if p.Iters == 0 {
		p.Iters = 5000
		if p.isLat() {
			p.Iters = 1000
		}
	}
	if o.verify && host != "" {
		if err := p.validate(); err != nil {
			return &usageError{msg: "perf: " + err.Error()}
		}
	}
	port := cfg.Perf.TCPPort
	if o.port > 0 {
		port = o.port
	}
	var dh *dpdkHost
	if cfg.Backend == profile.BackendDPDK {
		if o.pcap != "" {
			return &usageError{msg: "perf: --pcap records the udp backend; with backend dpdk capture on a tap or NIC mirror instead"}
		}
		// Before the setup exchange: a memif server's socket must be
		// listening when the client's engine starts.
		if dh, err = startDPDK(cfg, o.eal, false, stderr); err != nil {
			return err
		}
		dh.peerFirst = host == "" // the server closes after its client
		defer func() {
			if err := dh.shutdown(); err != nil {
				log.Sugar().Warnw("dpdk shutdown", "err", err)
			}
		}()
	} else if len(o.eal) > 0 {
		return &usageError{msg: fmt.Sprintf("perf: arguments after -- are EAL arguments, for backend dpdk (backend is %s)", cfg.Backend)}
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
	hook := func(n *node) {
		if capture != nil {
			capture(n)
		}
		if met != nil {
			met.watch(n, string(p.Transport))
		}
	}
	var (
		results  []perfResult
		n        *node
		runErr   error
		local    string
		remote   string
		isServer = host == ""
	)
	if isServer {
		results, n, p, local, remote, runErr = perfServer(cfg, dh, test, port, o.setupLimit, stop, hook, stdout)
	} else {
		results, n, local, remote, runErr = perfClient(cfg, dh, p, host, port, stop, newProgress(stderr, progressOn(o.progress, stderr)), hook)
	}
	var repair *repairStats
	var beStats engine.Stats // before close: a closed backend reports zeros
	if n != nil {
		if len(n.sess) > 0 {
			r := n.repair()
			repair = &r
		}
		beStats = n.be.Stats()
		n.close()
	}
	if cerr := closeCapture(); cerr != nil && runErr == nil {
		runErr = cerr
	}
	if len(results) > 0 {
		printHeader(stdout, p, cfg, o.gbits, local, remote)
		for _, r := range results {
			printRow(stdout, p, r, o.gbits)
		}
		fmt.Fprintln(stdout, resultLine)
		if repair != nil {
			printRepair(stdout, isServer, *repair, n.peerRepair)
		}
		if o.outJSON {
			if err := writeJSON(o.jsonFile, p, cfg, results, o.gbits); err != nil && runErr == nil {
				runErr = err
			}
		}
	}
	if len(results) == 0 && repair != nil {
		// A run that failed before its first result still says what the
		// transport did.
		printRepair(stdout, isServer, *repair, n.peerRepair)
	}
	if n != nil {
		logLoop(log, beStats)
	}
	if runErr != nil && n != nil {
		st := beStats
		log.Sugar().Infow("backend counters", "tx", st.TxPackets, "rx", st.RxPackets,
			"injected_drops", st.RxInjectedDrops, "kernel_drops", st.RxKernelDrops)
	}
	return runErr
}

// perfServer waits for one client on the TCP port and serves its test.
func perfServer(cfg profile.Config, dh *dpdkHost, test string, port int, wait time.Duration, stop func() bool, hook func(*node), stdout io.Writer) ([]perfResult, *node, perfParams, string, string, error) {
	var p perfParams
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, nil, p, "", "", fmt.Errorf("setup: listen on TCP port %d: %w", port, err)
	}
	defer ln.Close()
	fmt.Fprintln(stdout, "\n************************************")
	fmt.Fprintln(stdout, "* Waiting for client to connect... *")
	fmt.Fprintln(stdout, "************************************")
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	var end time.Time
	if wait > 0 {
		end = time.Now().Add(wait)
	}
	for {
		left := time.Duration(0)
		if !end.IsZero() {
			if left = time.Until(end); left <= 0 {
				return nil, nil, p, "", "", fmt.Errorf("setup: no client within %v", wait)
			}
		}
		conn, err := acceptStoppable(ln.(*net.TCPListener), left, stop)
		if err != nil {
			return nil, nil, p, "", "", err
		}
		c := newTCPCtrl(conn)
		hello, err := perfHello(cfg, c, conn, test, stop)
		if errors.Is(err, errInterrupted) {
			c.close()
			return nil, nil, p, "", "", err
		}
		if err != nil {
			// A bad, idle or foreign client: tell it, and wait for the next.
			_ = c.send(ctrlMsg{Type: "error", Err: err.Error()})
			c.close()
			fmt.Fprintf(stdout, " Refused client %v: %v\n", conn.RemoteAddr(), err)
			continue
		}
		defer c.close()
		p = *hello.Params
		ip, err := endpointIP(cfg.UDP.ServerIP, conn.LocalAddr())
		if err != nil {
			return nil, nil, p, "", "", err
		}
		res, n, err := serve(cfg, c, hello, pickOpener(cfg, dh, ip), stop, hook)
		local, remote := "", hello.UDP
		if n != nil {
			local = n.be.LocalAddr().String()
		}
		return res, n, p, local, remote, err
	}
}

// helloTimeout is how long a client that connected has to send its
// hello before the server drops it and waits for the next.
var helloTimeout = 5 * time.Second

// perfHello reads and checks a client's hello: its parameters, its test
// and transport, and its data-path address, which must be the TCP peer's
// own IP (or the profile's udp.client_ip): the server must never be made
// to send its test traffic to a third address.
func perfHello(cfg profile.Config, c *tcpCtrl, conn net.Conn, test string, stop func() bool) (ctrlMsg, error) {
	hello, err := waitMsg(c, nil, "hello", helloTimeout, stop)
	if err != nil {
		return hello, err
	}
	if hello.Params == nil {
		return hello, errors.New("setup: hello without parameters")
	}
	p := *hello.Params
	if err := p.validate(); err != nil {
		return hello, fmt.Errorf("setup: client's parameters: %w", err)
	}
	if p.Test != test || p.Transport != cfg.Transport {
		return hello, fmt.Errorf("setup: server runs %s over %s, client asked for %s over %s", test, cfg.Transport, p.Test, p.Transport)
	}
	udpAddr, err := netip.ParseAddrPort(hello.UDP)
	if err != nil {
		return hello, fmt.Errorf("setup: bad UDP address %q", hello.UDP)
	}
	tcpPeer, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		return hello, err
	}
	got, want := udpAddr.Addr().Unmap(), tcpPeer.Addr().Unmap()
	if got != want && !configuredPeer(cfg, got) {
		return hello, fmt.Errorf("setup: client's UDP address %v is not its TCP address %v", got, want)
	}
	if err := checkHelloKey(cfg, hello); err != nil {
		return hello, err
	}
	return hello, nil
}

// configuredPeer reports whether the server's own profile names a as a
// data-path peer, although it is not the TCP peer's address: the profile's
// udp.client_ip, or, with backend dpdk (whose ports usually sit on a data
// network of their own, apart from the control network the TCP setup
// uses), a static neighbour or an address on the subnet of one of its
// ports. Such an address is one the operator put on this host's own
// fabric, not a third party of the client's choosing.
func configuredPeer(cfg profile.Config, a netip.Addr) bool {
	if c, err := netip.ParseAddr(cfg.UDP.ClientIP); err == nil && c.Unmap() == a {
		return true
	}
	if cfg.Backend != profile.BackendDPDK {
		return false
	}
	for _, n := range cfg.DPDK.Neighbours {
		if ip, err := netip.ParseAddr(n.IP); err == nil && ip.Unmap() == a {
			return true
		}
	}
	for _, port := range cfg.DPDK.Ports {
		if pre, err := netip.ParsePrefix(port.IP); err == nil && pre.Bits() < 32 && pre.Masked().Contains(a) {
			return true
		}
	}
	return false
}

// perfClient connects to the server and runs the test.
func perfClient(cfg profile.Config, dh *dpdkHost, p perfParams, host string, port int, stop func() bool, prog *progress, hook func(*node)) ([]perfResult, *node, string, string, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if cfg.UDP.ClientIP != "" {
		if a, err := netip.ParseAddr(cfg.UDP.ClientIP); err == nil {
			d.LocalAddr = &net.TCPAddr{IP: a.AsSlice()}
		}
	}
	var conn net.Conn
	var err error
	for end := time.Now().Add(5 * time.Second); ; {
		// Like perftest, retry while the server is still coming up.
		conn, err = d.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil || time.Now().After(end) || stop() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, nil, "", "", fmt.Errorf("setup: couldn't connect to %s:%d: %w", host, port, err)
	}
	defer conn.Close()
	ip, err := endpointIP(cfg.UDP.ClientIP, conn.LocalAddr())
	if err != nil {
		return nil, nil, "", "", err
	}
	c := newTCPCtrl(conn)
	res, n, err := runClient(cfg, p, c, pickOpener(cfg, dh, ip), stop, prog, hook)
	local, remote := "", ""
	if n != nil {
		local, remote = n.be.LocalAddr().String(), n.peerAddr
	}
	return res, n, local, remote, err
}

// pickOpener: the DPDK engine when the process runs one, else a UDP
// backend on ip.
func pickOpener(cfg profile.Config, dh *dpdkHost, ip netip.Addr) opener {
	if dh != nil {
		return dh.opener(cfg)
	}
	return udpOpener(cfg, ip)
}

// endpointIP is the profile's address, or the setup connection's.
func endpointIP(configured string, tcpAddr net.Addr) (netip.Addr, error) {
	if configured != "" {
		return netip.ParseAddr(configured)
	}
	ap, err := netip.ParseAddrPort(tcpAddr.String())
	if err != nil {
		return netip.Addr{}, err
	}
	a := ap.Addr().Unmap()
	if !a.Is4() {
		return netip.Addr{}, fmt.Errorf("setup connection over %v: the UDP backend needs IPv4", a)
	}
	return a, nil
}

// acceptStoppable accepts one connection, giving up on stop or after wait.
func acceptStoppable(ln *net.TCPListener, wait time.Duration, stop func() bool) (net.Conn, error) {
	var end time.Time
	if wait > 0 {
		end = time.Now().Add(wait)
	}
	for {
		_ = ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, err
		}
		if stop() {
			return nil, errInterrupted
		}
		if !end.IsZero() && time.Now().After(end) {
			return nil, fmt.Errorf("setup: no client within %v", wait)
		}
	}
}
