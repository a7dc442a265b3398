package kernelfabric

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/metaroce/metaroce/engine"
	"github.com/metaroce/metaroce/engine/udp"
	"github.com/metaroce/metaroce/metaroce"
	"github.com/metaroce/metaroce/test/internal/testenv"
	"github.com/metaroce/metaroce/verbs"
	"github.com/stretchr/testify/require"
)

const udpChildEnv = "MR_KERNELFABRIC_UDP_PREFIX"

// spawn builds the namespace fabric (prep adds what the backend needs),
// re-runs test name of this binary inside the hosts namespace with env
// naming the fabric, and removes the namespaces whatever happens.
func spawn(t *testing.T, name, env, prefix string, limit time.Duration, prep func(Topology) error) {
	testenv.Root(t, "kernel fabric: network namespaces, veths, nftables")
	for _, tool := range []string{"ip", "nft"} {
		testenv.Tool(t, tool, "scripts/install-deps.sh installs iproute2 and nftables")
	}
	topo := Topology{Prefix: fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)}
	t.Cleanup(func() {
		if err := topo.Destroy(); err != nil {
			t.Errorf("removing namespaces: %v", err)
		}
	})
	require.NoError(t, topo.Create())
	if prep != nil {
		require.NoError(t, prep(topo))
	}
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("ip", "netns", "exec", topo.NS("hosts"), self, "-test.run", "^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+topo.Prefix)
	cmd.WaitDelay = time.Second
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s child did not finish in %v:\n%s", name, limit, out)
	}
	t.Logf("child output:\n%s", out)
	require.NoError(t, err, "%s child failed", name)
}

// TestKernelFabricUDP runs the kernel-fabric test (fabric.run) over the
// UDP backend: both endpoints on the kernel's own stack in the hosts
// namespace (hA0 10.1.0.2, hB0 10.2.0.2), every packet across leafA, the
// spines and leafB.
func TestKernelFabricUDP(t *testing.T) {
	if prefix := os.Getenv(udpChildEnv); prefix != "" {
		udpChild(t, Topology{Prefix: prefix})
		return
	}
	spawn(t, "TestKernelFabricUDP", udpChildEnv, "mrfu", 90*time.Second, Topology.KernelHosts)
}

// udpLoop runs a UDP backend and its endpoint on one goroutine; do runs
// a function there, between two steps.
type udpLoop struct {
	b    *udp.Backend
	cmds chan udpCmd
}

type udpCmd struct {
	fn   func(verbs.Time)
	done chan struct{}
}

func (l *udpLoop) do(fn func(verbs.Time)) error {
	c := udpCmd{fn: fn, done: make(chan struct{})}
	l.cmds <- c
	<-c.done
	return nil
}

func (l *udpLoop) Step(now verbs.Time) (bool, error) {
	for {
		select {
		case c := <-l.cmds:
			c.fn(now)
			close(c.done)
		default:
			return false, nil
		}
	}
}

func udpChild(t *testing.T, topo Topology) {
	addrs := [2]netip.AddrPort{netip.MustParseAddrPort(HostAIP + ":4794"), netip.MustParseAddrPort(HostBIP + ":4794")}
	ctx, cancel := context.WithCancel(context.Background())
	var hosts [2]end
	var backends [2]*udp.Backend
	errs := make(chan error, 2)
	for i := range hosts {
		b, err := udp.New(udp.Config{Addr: addrs[i], SocketBuffer: 32 << 20, IdleWait: 200 * time.Microsecond})
		require.NoError(t, err)
		peer, err := b.AddPeer(addrs[1-i])
		require.NoError(t, err)
		ep, err := metaroce.NewEndpoint(metaroce.Config{Node: metaroce.NodeID(i + 1), Incarnation: 1, MTU: 1024,
			Paths: 64, AcceptIncoming: i == 1, ConnectRetries: 200, ConnectRetry: 20 * time.Millisecond,
			PathReprobe: 20 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, b.Attach(ep))
		backends[i] = b
		l := &udpLoop{b: b, cmds: make(chan udpCmd)}
		hosts[i] = end{ep: ep, do: l.do, stats: b.Stats, peer: peer}
		go func() { errs <- b.Run(ctx, engine.App(l)) }()
	}
	t.Cleanup(func() {
		cancel()
		for range hosts {
			if err := <-errs; err != nil && err != context.Canceled {
				t.Errorf("udp backend: %v", err)
			}
		}
		for _, b := range backends {
			require.NoError(t, b.Close())
		}
	})
	f := &fabric{t: t, name: "udp", topo: topo, h: hosts, alloc: func(n int) []byte { return make([]byte, n) }}
	f.run()
}
