package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// leaderName returns the name (listen address) of the coordinator that leads the cluster
// under prefix, "" when none does.
func leaderName(t *testing.T, cli *clientv3.Client, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"leader/", clientv3.WithFirstCreate()...)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// processCluster is three zarisd coordinators and three zarisd nodes sharing the test's etcd.
type processCluster struct {
	coords map[string]*proc // by listen address
	nodes  []*proc
	seeds  []string
	admin  *AdminClient
	cli    *clientv3.Client
	prefix string
	// startCoordinator starts a coordinator process listening on addr when it leads.
	startCoordinator func(addr string) *proc
}

func startProcessCluster(t *testing.T, bin string) *processCluster {
	t.Helper()
	cli, prefix := control.ForTest(t)
	pc := &processCluster{coords: map[string]*proc{}, cli: cli, prefix: prefix}
	var addrs []string
	for range 3 {
		addrs = append(addrs, stablePort())
	}
	etcd := []string{"--etcd-endpoints", strings.Join(cli.Endpoints(), ","), "--etcd-prefix", prefix}
	pc.startCoordinator = func(addr string) *proc {
		return startProc(t, bin, append([]string{"coordinator", "--listen", addr, "--nodes", "3", "--segments", "16",
			"--failure-timeout", "1s", "--session-ttl", "1s", "--log-level", "debug"}, etcd...)...)
	}
	for _, a := range addrs {
		pc.coords[a] = pc.startCoordinator(a)
	}
	all := strings.Join(addrs, ",")
	for id := 1; id <= 3; id++ {
		n := startProc(t, bin, append([]string{"node", "--id", strconv.Itoa(id), "--listen", "127.0.0.1:0", "--coordinator", all,
			"--log-level", "debug"}, etcd...)...)
		pc.nodes = append(pc.nodes, n)
		pc.seeds = append(pc.seeds, n.addr)
	}
	pc.admin = DialCoordinator(all, nil)
	t.Cleanup(func() { pc.admin.Close() })
	waitPeerMap(t, pc.admin, "the cluster did not come up", func(pm *zarispeer.PeerMap) bool {
		for _, s := range pm.Segments {
			if s.Owner == nil || len(s.Replicas) != 1 {
				return false
			}
		}
		return len(pm.Nodes) == 3
	})
	return pc
}

// loadedProcessCluster starts a processCluster and a workload on it, and returns them with
// the map once the workload made progress. It skips in -short mode.
func loadedProcessCluster(t *testing.T) (*processCluster, *workload, *zarispeer.PeerMap) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs zarisd processes")
	}
	pc := startProcessCluster(t, buildZarisd(t))
	w := startWorkload(t, pc.seeds, 4)
	w.waitAcked(t, 50)
	before, err := pc.admin.PeerMap(testCtx(t))
	require.NoError(t, err)
	return pc, w, before
}

// kill -9 of the leading coordinator under load: a standby leads within two seconds, loads
// the state and carries on; a node killed after the takeover is failed over by the new
// leader; no write fails and no acknowledged write is lost.
func TestProcess_KillNineLeadingCoordinatorUnderLoad(t *testing.T) {
	pc, w, before := loadedProcessCluster(t)
	leader := leaderName(t, pc.cli, pc.prefix)
	require.Contains(t, pc.coords, leader)
	killed := time.Now()
	require.NoError(t, pc.coords[leader].cmd.Process.Kill())
	var next string
	require.Eventually(t, func() bool {
		next = leaderName(t, pc.cli, pc.prefix)
		return next != "" && next != leader
	}, 2*time.Second, 5*time.Millisecond, "no standby led within 2 s of the leader's kill -9")
	t.Logf("a standby led %v after the leader's kill -9", time.Since(killed))
	waitPeerMap(t, pc.admin, "the new leader did not publish a newer map", func(pm *zarispeer.PeerMap) bool {
		return pm.Epoch > before.Epoch && pm.ClusterId == before.ClusterId
	})
	w.waitAcked(t, 50)

	require.NoError(t, pc.nodes[1].cmd.Process.Kill())
	waitPeerMap(t, pc.admin, "node 2 was not failed over by the new leader", func(pm *zarispeer.PeerMap) bool {
		return !slices.ContainsFunc(pm.Segments, func(s *zarispeer.PeerSegment) bool { return s.Owner == nil || *s.Owner == 2 })
	})
	w.waitAcked(t, 50)
	w.finish(t)
}

// Every coordinator down while etcd stays up: the nodes keep serving (their etcd leases
// hold) for several times their lease TTL; when one coordinator returns, it continues the
// cluster and churn resumes (a node killed then is failed over); nothing acknowledged is
// lost and no write fails.
func TestProcess_AllCoordinatorsDownNodesKeepServing(t *testing.T) {
	pc, w, before := loadedProcessCluster(t)

	for _, p := range pc.coords {
		require.NoError(t, p.cmd.Process.Kill())
	}
	// Writes go on with no coordinator at all, for three node lease TTLs (a coordinator's
	// wall-clock lease ran out in 1.25 s).
	down := time.Now()
	for time.Since(down) < 3*DefaultLeaseTTL {
		w.waitAcked(t, 50)
	}

	var addr string
	for a := range pc.coords {
		addr = a
		break
	}
	pc.coords[addr] = pc.startCoordinator(addr)
	waitPeerMap(t, pc.admin, "the returning coordinator did not continue the cluster", func(pm *zarispeer.PeerMap) bool {
		return pm.Epoch > before.Epoch && pm.ClusterId == before.ClusterId
	})
	require.NoError(t, pc.nodes[2].cmd.Process.Kill())
	waitPeerMap(t, pc.admin, "node 3 was not failed over", func(pm *zarispeer.PeerMap) bool {
		return !slices.ContainsFunc(pm.Segments, func(s *zarispeer.PeerSegment) bool { return s.Owner == nil || *s.Owner == 3 })
	})
	w.waitAcked(t, 50)
	w.finish(t)
}
