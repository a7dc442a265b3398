package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/metrics"
)

// metricsServer serves /metrics (--metrics-addr). The transport cores'
// counters are plain fields owned by the engine goroutine, so that
// goroutine copies them into a metrics.Snapshot every 100 ms (node.run
// calls the sampler on the backend's loop) and scrapes read the latest
// copy; the backend's counters (engine.Backend.Stats) are read live.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
	col *metrics.Collector
}

func startMetrics(addr string, log *zap.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	m := &metricsServer{ln: ln, col: metrics.NewCollector()}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.col)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Sugar().Errorw("metrics endpoint stopped", "addr", ln.Addr().String(), "error", err)
		}
	}()
	log.Sugar().Infow("metrics", "addr", ln.Addr().String())
	return m, nil
}

// Addr is where the endpoint listens.
func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

// watch makes n's counters visible, labelled transport=name.
func (m *metricsServer) watch(n *node, name string) {
	m.col.SetBackend(name, func() metrics.Backend { return backendSnapshot(n.backendStats()) })
	n.sampler = func() {
		m.col.SetConns(name, n.snapshot())
		m.col.SetEndpoint(name, n.kind.endpoint(n.dev))
	}
	n.sampler()
}

func (m *metricsServer) close() { _ = m.srv.Close() }

func backendSnapshot(s engine.Stats) metrics.Backend {
	b := metrics.Backend{TxPackets: s.TxPackets, TxBytes: s.TxBytes, TxErrors: s.TxErrors,
		RxPackets: s.RxPackets, RxBytes: s.RxBytes, RxCE: s.RxCE,
		RxInjectedDrops: s.RxInjectedDrops, RxUnknownPeer: s.RxUnknownPeer,
		RxTruncated: s.RxTruncated, RxKernelDrops: s.RxKernelDrops, RxOtherDrops: s.RxOtherDrops}
	if l := s.Loop; l.Measured {
		b.LoopSeconds = []metrics.Seconds{{Phase: "rx", S: l.Rx.Seconds()}, {Phase: "core", S: l.Core.Seconds()},
			{Phase: "tx", S: l.Tx.Seconds()}, {Phase: "app", S: l.App.Seconds()}, {Phase: "idle", S: l.Idle.Seconds()}}
	}
	if s.ZeroCopy {
		b.ZeroCopySent = s.ZeroCopySent
		b.ZeroCopyFallbacks = []metrics.Count{{Reason: "not_dpdk_memory", N: s.ZeroCopyFallbackMemory},
			{Reason: "no_slot", N: s.ZeroCopyFallbackSlots}, {Reason: "no_mbuf", N: s.ZeroCopyFallbackNoMbuf}}
	}
	return b
}

// snapshot copies the transport counters (engine goroutine only).
func (n *node) snapshot() []metrics.Conn { return n.kind.snapshot(n.sess) }
