package sim

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"github.com/metaroce/metaroce/sim/fabric"
)

// Experiment is an experiment file, with --set overrides applied, ready
// to run: its sweep expanded to runs, each run once per transport.
type Experiment struct {
	File       string
	Name       string
	Cfg        Config // the file as given (base values of swept keys)
	Axes       []Axis
	Transports []string
	doc        *yaml.Node
}

// Axis is one swept key and its values, in file order.
type Axis struct {
	Key    string
	Values []*yaml.Node
}

// Run is one point of the sweep for one transport.
type Run struct {
	Index     int
	Transport string
	Params    Row // swept key → value
	cfg       *Config
	tr        Transport
	params    any
}

// Load reads an experiment file and applies overrides ("key=value": a
// dotted key of the file, or sweep.<key>=[values] to replace or add a
// sweep). Every key is checked against the schema; errors name the file,
// the key and where it is.
func Load(file string, sets []string) (*Experiment, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	e, err := Parse(file, b, sets)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Parse is Load on bytes already read (file names them in errors).
func Parse(file string, data []byte, sets []string) (*Experiment, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping of keys at the top level", file)
	}
	root := doc.Content[0]
	if err := checkNode(root, reflect.TypeOf(Config{}), ""); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	e := &Experiment{File: file, doc: root}
	axes, err := parseSweep(getKey(root, "sweep"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	e.Axes = axes
	for _, s := range sets {
		if err := e.set(s); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	// The base configuration must decode and validate on its own (with
	// each swept key at its first value, so that sweeping a required key
	// is allowed).
	base := cloneNode(root)
	for _, a := range e.Axes {
		if err := setKey(base, a.Key, cloneNode(a.Values[0])); err != nil {
			return nil, fmt.Errorf("%s: sweep %s: %w", file, a.Key, err)
		}
	}
	if err := decode(base, &e.Cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := e.Cfg.defaults(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	e.Name = e.Cfg.Experiment
	if e.Name == "" {
		e.Name = strings.TrimSuffix(fileBase(file), ".yaml")
	}
	e.Transports = e.Cfg.Transports
	if len(e.Transports) == 0 {
		e.Transports = Transports()
	}
	for _, t := range e.Transports {
		if _, ok := lookupTransport(t); !ok {
			return nil, fmt.Errorf("%s: transports: unknown transport %q (available: %s)", file, t, strings.Join(Transports(), ", "))
		}
	}
	// Every run's transport parameters are checked now, not when the run
	// starts (a transport may check them: paramsChecker).
	if _, err := e.Runs(); err != nil {
		return nil, err // names the file and the run
	}
	for k := range e.Cfg.Report.Baseline {
		found := false
		for _, a := range e.Axes {
			found = found || a.Key == k
		}
		if !found {
			return nil, fmt.Errorf("%s: report.baseline: %q is not a swept key", file, k)
		}
	}
	return e, nil
}

func fileBase(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func parseSweep(n *yaml.Node) ([]Axis, error) {
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: sweep must map keys to lists of values", n.Line)
	}
	var axes []Axis
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		a, err := newAxis(k.Value, v)
		if err != nil {
			return nil, fmt.Errorf("line %d: sweep: %w", k.Line, err)
		}
		axes = append(axes, a)
	}
	return axes, nil
}

func newAxis(key string, v *yaml.Node) (Axis, error) {
	t, err := resolveKey(key)
	if err != nil {
		return Axis{}, fmt.Errorf("key %q: %w", key, err)
	}
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		return Axis{}, fmt.Errorf("%s: want a non-empty list of values", key)
	}
	for _, x := range v.Content {
		if err := checkNode(x, t, key); err != nil {
			return Axis{}, err
		}
	}
	return Axis{Key: key, Values: v.Content}, nil
}

// set applies one --set override.
func (e *Experiment) set(kv string) error {
	key, val, ok := strings.Cut(kv, "=")
	key = strings.TrimSpace(key)
	if !ok {
		return errors.New("want key=value")
	}
	v, err := parseValue(val)
	if err != nil {
		return err
	}
	if sk, ok := strings.CutPrefix(key, "sweep."); ok {
		a, err := newAxis(sk, v)
		if err != nil {
			return err
		}
		for i := range e.Axes {
			if e.Axes[i].Key == sk {
				e.Axes[i] = a
				return nil
			}
		}
		e.Axes = append(e.Axes, a)
		return nil
	}
	t, err := resolveKey(key)
	if err != nil {
		return err
	}
	if err := checkNode(v, t, key); err != nil {
		return err
	}
	if err := setKey(e.doc, key, v); err != nil {
		return err
	}
	// Setting a swept key fixes it: the sweep runs that one value.
	for i := range e.Axes {
		if e.Axes[i].Key == key {
			e.Axes[i].Values = []*yaml.Node{v}
		}
	}
	return nil
}

// Runs expands the sweep: every combination of the axes' values (the
// first axis varies slowest), each once per transport, transports
// innermost so that their rows sit side by side.
func (e *Experiment) Runs() ([]*Run, error) {
	var runs []*Run
	idx := make([]int, len(e.Axes))
	for {
		doc := cloneNode(e.doc)
		var params Row
		for i, a := range e.Axes {
			v := a.Values[idx[i]]
			if err := setKey(doc, a.Key, cloneNode(v)); err != nil {
				return nil, fmt.Errorf("sweep %s: %w", a.Key, err)
			}
			params = append(params, Field{a.Key, scalarValue(v)})
		}
		for _, tn := range e.Transports {
			r, err := e.newRun(len(runs), tn, doc, params)
			if err != nil {
				return nil, fmt.Errorf("%s: run %d (%s%s): %w", e.File, len(runs), tn, describe(params), err)
			}
			runs = append(runs, r)
		}
		k := len(idx) - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < len(e.Axes[k].Values) {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			return runs, nil
		}
	}
}

func describe(params Row) string {
	var b strings.Builder
	for _, p := range params {
		fmt.Fprintf(&b, ", %s=%v", p.Key, p.Value)
	}
	return b.String()
}

func (e *Experiment) newRun(i int, tn string, doc *yaml.Node, params Row) (*Run, error) {
	cfg := &Config{}
	if err := decode(doc, cfg); err != nil {
		return nil, err
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tr, _ := lookupTransport(tn)
	p := tr.NewParams()
	if n, ok := cfg.Transport.Per[tn]; ok {
		if err := decodeParams(&n, p, "transport."+tn); err != nil {
			return nil, err
		}
	}
	if pc, ok := tr.(paramsChecker); ok {
		if err := pc.CheckParams(cfg, p); err != nil {
			return nil, err
		}
	}
	return &Run{Index: i, Transport: tn, Params: params, cfg: cfg, tr: tr, params: p}, nil
}

// Options controls an execution.
type Options struct {
	// Parallel is the number of runs at once (default GOMAXPROCS).
	Parallel int
	// Progress, if set, is updated as runs advance.
	Progress *Progress
	// Capture, if set, receives the packets of host cfg.pcap.host in run
	// cfg.pcap.run, in event order.
	Capture func(t int64, f Frame)
}

// Progress reports how far an execution is, in virtual time over all its
// runs. Safe for use from another goroutine.
type Progress struct {
	mu    sync.Mutex
	runs  []*atomic.Int64
	total []int64
}

// Fraction is the share of the execution's virtual time done, 0..1.
func (p *Progress) Fraction() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var done, total float64
	for i, r := range p.runs {
		done += float64(min(r.Load(), p.total[i]))
		total += float64(p.total[i])
	}
	if total == 0 {
		return 0
	}
	return done / total
}

// Results are an execution's rows, in run order.
type Results struct {
	Experiment string
	Cfg        Config
	SweepKeys  []string
	Rows       []Row // one per run: experiment, transport, swept keys, figures, series
}

// Execute runs every run of the experiment, independent runs in parallel,
// and returns the rows in run order. Results do not depend on Parallel.
func (e *Experiment) Execute(o Options) (*Results, error) {
	runs, err := e.Runs()
	if err != nil {
		return nil, err
	}
	if o.Capture != nil && e.Cfg.Pcap.Run >= len(runs) {
		return nil, fmt.Errorf("%s: pcap.run = %d, the experiment has runs 0..%d", e.File, e.Cfg.Pcap.Run, len(runs)-1)
	}
	par := o.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	prog := make([]*atomic.Int64, len(runs))
	for i := range prog {
		prog[i] = &atomic.Int64{}
	}
	if o.Progress != nil {
		o.Progress.mu.Lock()
		o.Progress.runs = prog
		o.Progress.total = make([]int64, len(runs))
		for i, r := range runs {
			o.Progress.total[i] = int64(r.cfg.Duration)
		}
		o.Progress.mu.Unlock()
	}
	out := make([]*runResult, len(runs))
	errs := make([]error, len(runs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(par, len(runs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(runs) {
					return
				}
				r := runs[i]
				var tap *fabric.Tap
				if o.Capture != nil && i == r.cfg.Pcap.Run {
					tap = &fabric.Tap{Host: int32(r.cfg.Pcap.Host), Fn: func(t Time, f Frame) { o.Capture(int64(t), f) }}
				}
				out[i], errs[i] = execRun(r, tap, prog[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			r := runs[i]
			return nil, fmt.Errorf("%s: run %d (%s%s): %w", e.File, i, r.Transport, describe(r.Params), err)
		}
	}
	res := &Results{Experiment: e.Name, Cfg: e.Cfg}
	for _, a := range e.Axes {
		res.SweepKeys = append(res.SweepKeys, a.Key)
	}
	for i, r := range runs {
		row := Row{{"experiment", e.Name}, {"transport", r.Transport}}
		row = append(row, r.Params...)
		row = append(row, out[i].row...)
		if len(out[i].series) > 0 {
			row = append(row, Field{"series", out[i].series})
		}
		res.Rows = append(res.Rows, row)
	}
	e.applyBaseline(res)
	return res, nil
}

func execRun(r *Run, tap *fabric.Tap, prog *atomic.Int64) (*runResult, error) {
	if tap != nil && (tap.Host < 0 || int(tap.Host) >= r.cfg.Topology.NumHosts()) {
		return nil, fmt.Errorf("pcap.host = %d, the topology has hosts 0..%d", tap.Host, r.cfg.Topology.NumHosts()-1)
	}
	s, err := newSim(runSpec{cfg: r.cfg, transport: r.tr, params: r.params, tap: tap, progress: prog})
	if err != nil {
		return nil, err
	}
	return s.run()
}

// applyBaseline makes efficiency relative to the baseline runs named by
// report.baseline (see ReportConfig).
func (e *Experiment) applyBaseline(res *Results) {
	bl := e.Cfg.Report.Baseline
	if len(bl) == 0 {
		return
	}
	matches := func(row, base Row) bool {
		tr, _ := row.Get("transport")
		tb, _ := base.Get("transport")
		if tr != tb {
			return false
		}
		for _, k := range res.SweepKeys {
			vb, _ := base.Get(k)
			if want, ok := bl[k]; ok {
				if !sameValue(vb, want) {
					return false
				}
				continue
			}
			vr, _ := row.Get(k)
			if fmt.Sprint(vr) != fmt.Sprint(vb) {
				return false
			}
		}
		return true
	}
	for i := range res.Rows {
		row := &res.Rows[i]
		g, ok := row.Float("goodput_gbps")
		if !ok {
			continue
		}
		var eff any
		var bg any
		for _, base := range res.Rows {
			if matches(*row, base) {
				if b, ok := base.Float("goodput_gbps"); ok && b > 0 {
					eff, bg = g/b, b
				}
				break
			}
		}
		row.Set("efficiency", eff)
		row.Set("baseline_gbps", bg)
	}
}

// sameValue compares a row value with a baseline value from the file,
// numerically when both are numbers.
func sameValue(v any, want string) bool {
	if f, ok := Number(v); ok {
		if w, err := strconv.ParseFloat(strings.TrimSpace(want), 64); err == nil {
			return f == w
		}
	}
	return fmt.Sprint(v) == want
}
