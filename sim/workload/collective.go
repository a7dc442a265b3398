package workload

import (
	"github.com/metaroce/metaroce/verbs"
)

// collective runs one collective over ranks 0..n-1 (host i is rank i),
// as nccl-tests measures it; size S is the per-rank buffer.
//
// allreduce: the ring algorithm. Rank i has one connection to rank i+1;
// the operation is 2(n−1) steps, and in each step every rank sends S/n
// bytes to the next. Rank i sends step k+1 once it has received step k
// from rank i−1 (it must reduce, or copy, what it received before
// forwarding it); step 0 needs nothing. It is done when every rank has
// received all 2(n−1) steps.
//
// all-to-all: every rank sends S/n bytes to every other rank at once, on
// its own connection to each; done when every message has arrived.
//
// Channels, as NCCL runs collectives: each of workload.channels channels
// has its own connections and moves its own slice of every message (S/n
// split as evenly as bytes allow). An all-reduce's channels are
// independent rings: channel c of rank i sends its step k+1 once it has
// received step k of channel c. Each channel's connections have their own
// source ports, so a single-path transport's flows of one ring hop can
// take different routes.
//
// Iterations, as nccl-tests runs them: warmup_iters untimed ones, then
// iters timed ones, back to back; each starts once every rank has
// received everything of the one before (a barrier, the same for every
// transport). The first iteration starts with the connections just
// dialled, so it pays for their setup and their first RTTs; the later
// ones run on warm connections, as an application's do.
//
// Figures (nccl-tests' definitions): time t of an iteration, from its
// start to its last arrival, averaged over the timed iterations;
// algbw = S/t; busbw = algbw·2(n−1)/n for allreduce and algbw·(n−1)/n for
// all-to-all. We give them in Gb/s, to compare with links, where
// nccl-tests prints GB/s. first_iter_us is the first iteration's time,
// warm-up or not: the cold start.
type collective struct {
	cfg       *Config
	sp        *Spec
	kind      string
	ranks     int
	channels  int
	part      []int // bytes of each channel's slice of a message
	steps     int
	conns     []ConnRef    // allreduce: [c*n+i] rank i → i+1 on channel c; all-to-all: [(i*n+j)*channels+c]
	dst       []int        // the receiving rank of each connection (by ConnRef)
	chanOf    []int        // the channel of each connection (by ConnRef)
	recvd     []int        // messages each rank received in this iteration
	want      int          // messages each rank must receive per iteration
	ranksDone int          // ranks that received all of this iteration
	iter      int          // this iteration, from 0 (warm-ups first)
	iterStart verbs.Time   // when this iteration started
	firstIter verbs.Time   // the first iteration's time (ns)
	timed     []verbs.Time // the times of the timed iterations (ns)
	doneAt    verbs.Time   // when the last iteration ended
	fcts      []float64    // all-to-all: message completion times of timed iterations (µs)
	sentAt    []verbs.Time // all-to-all: post time per connection
}

// chunk is S/n rounded up: what each rank sends to a peer in one step.
func (w *collective) chunk() int {
	return max(1, int((int64(w.cfg.Size)+int64(w.ranks)-1)/int64(w.ranks)))
}

// maxMessage is the largest channel slice of a chunk.
func (w *collective) MaxMessage() int {
	return (w.chunk() + w.channels - 1) / w.channels
}

// dial opens a connection from rank i to rank j for channel ch.
func (w *collective) dial(s Env, i, j, ch int) (ConnRef, error) {
	ref, err := s.Dial(w.host(s, i), w.host(s, j))
	if err != nil {
		return 0, err
	}
	for len(w.dst) <= int(ref) {
		w.dst = append(w.dst, 0)
		w.chanOf = append(w.chanOf, 0)
	}
	w.dst[ref], w.chanOf[ref] = j, ch
	return ref, nil
}

func (w *collective) Setup(s Env) error {
	n, nc := w.ranks, w.channels
	chunk := w.chunk()
	w.part = make([]int, nc)
	for c := range w.part {
		w.part[c] = chunk / nc
		if c < chunk%nc {
			w.part[c]++
		}
	}
	w.recvd = make([]int, n)
	w.doneAt = verbs.Never
	if w.kind == "allreduce" {
		w.steps = 2 * (n - 1)
		w.want = w.steps * nc
		for c := 0; c < nc; c++ {
			for i := 0; i < n; i++ {
				ref, err := w.dial(s, i, (i+1)%n, c)
				if err != nil {
					return err
				}
				w.conns = append(w.conns, ref)
			}
		}
		return nil
	}
	w.want = (n - 1) * nc
	w.conns = make([]ConnRef, n*n*nc)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			for c := 0; c < nc; c++ {
				k := (i*n+j)*nc + c
				w.conns[k] = -1
				if i != j {
					ref, err := w.dial(s, i, j, c)
					if err != nil {
						return err
					}
					w.conns[k] = ref
				}
			}
		}
	}
	return nil
}

func (w *collective) Begin(s Env) { w.startIter(s) }

// startIter starts iteration w.iter on every rank.
func (w *collective) startIter(s Env) {
	w.iterStart = s.Now()
	w.ranksDone = 0
	clear(w.recvd)
	n, nc := w.ranks, w.channels
	if w.kind == "allreduce" {
		for c := 0; c < nc; c++ {
			for i := 0; i < n; i++ {
				s.Post(w.conns[c*n+i], w.host(s, i), w.part[c], 0)
			}
		}
		return
	}
	if w.sentAt == nil {
		w.sentAt = make([]verbs.Time, len(w.dst))
	}
	for i := 0; i < n; i++ {
		for j := 1; j < n; j++ {
			// Rank i starts with rank i+1 and goes round, as
			// all-to-all implementations stagger their peers.
			for c := 0; c < nc; c++ {
				ref := w.conns[(i*n+(i+j)%n)*nc+c]
				w.sentAt[ref] = s.Now()
				s.Post(ref, w.host(s, i), w.part[c], 0)
			}
		}
	}
}

func (w *collective) OnCompletion(s Env, c Completion) {
	if !c.Recv || !c.OK {
		return
	}
	n := w.ranks
	rank := w.dst[c.Conn]
	if w.kind == "allreduce" {
		// This channel's ring moves on: rank forwards the next step.
		if k := int(c.ID) + 1; k < w.steps {
			ch := w.chanOf[c.Conn]
			s.Post(w.conns[ch*n+rank], w.host(s, rank), w.part[ch], uint32(k))
		}
	} else {
		if w.iter >= w.cfg.WarmupIters {
			w.fcts = append(w.fcts, float64(s.Now()-w.sentAt[c.Conn])/1e3)
		}
	}
	w.recvd[rank]++
	if w.recvd[rank] != w.want {
		return
	}
	if w.ranksDone++; w.ranksDone < n {
		return
	}
	t := s.Now() - w.iterStart
	if w.iter == 0 {
		w.firstIter = t
	}
	if w.iter >= w.cfg.WarmupIters {
		w.timed = append(w.timed, t)
	}
	if w.iter++; w.iter == w.cfg.WarmupIters+w.cfg.Iters {
		w.doneAt = s.Now()
		return
	}
	w.startIter(s)
}

// host is the host of rank r. Placement packed puts rank r on host r, so
// neighbours in the ring share a leaf; spread deals the ranks out over the
// leaves in turn (rank r on leaf r mod leaves), as when a job's ranks sit in
// different racks and every ring hop crosses the spines.
func (w *collective) host(s Env, r int) int {
	if w.cfg.Placement != "spread" || w.sp.Leaves < 2 {
		return r
	}
	l := w.sp.Leaves
	return (r%l)*w.sp.HostsPerLeaf + r/l
}

func (w *collective) Sample(Env) {}

func (w *collective) Finished() bool { return w.doneAt != verbs.Never }

func (w *collective) Report(s Env, r Figures) {
	n := float64(w.ranks)
	capGbps := capacityGbps(w.sp, 1)
	r.Add("collective", w.kind)
	r.Add("ranks", w.ranks)
	r.Add("size_bytes", int64(w.cfg.Size))
	r.Add("channels", w.channels)
	r.Add("iters", w.cfg.Iters)
	r.Add("warmup_iters", w.cfg.WarmupIters)
	if w.doneAt == verbs.Never {
		r.Add("goodput_gbps", nil)
		r.Add("link_gbps", capGbps)
		r.Add("efficiency", nil)
		r.Add("completion_us", nil)
		r.Add("algbw_gbps", nil)
		r.Add("busbw_gbps", nil)
		r.Add("first_iter_us", nil)
		return
	}
	var sum verbs.Time
	for _, d := range w.timed {
		sum += d
	}
	t := float64(sum) / float64(len(w.timed)) // ns
	alg := float64(w.cfg.Size) * 8 / t
	bus := alg * (n - 1) / n
	if w.kind == "allreduce" {
		bus = alg * 2 * (n - 1) / n
	}
	r.Add("goodput_gbps", bus)
	r.Add("link_gbps", capGbps)
	r.Add("efficiency", bus/capGbps)
	r.Add("completion_us", t/1e3)
	r.Add("algbw_gbps", alg)
	r.Add("busbw_gbps", bus)
	r.Add("first_iter_us", float64(w.firstIter)/1e3)
	if len(w.fcts) > 0 {
		r.Add("fct_p50_us", percentile(w.fcts, 50))
		r.Add("fct_p99_us", percentile(w.fcts, 99))
		r.Add("fct_max_us", percentile(w.fcts, 100))
	}
}
