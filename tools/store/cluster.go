package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store/control"
)

// ClusterConfig configures an in-process cluster: a coordinator and Nodes nodes on loopback.
type ClusterConfig struct {
	// Nodes is the number of nodes to start; default 3.
	Nodes int
	// Segments is the number of segments; default DefaultSegments.
	Segments int32
	// ReplicationFactor is the number of copies per segment; default DefaultReplicationFactor.
	ReplicationFactor int
	// Heartbeat is the coordinator's heartbeat interval; default DefaultHeartbeat.
	Heartbeat time.Duration
	// FailureTimeout: see CoordinatorConfig.FailureTimeout; default DefaultFailureTimeout.
	FailureTimeout time.Duration
	// ProbeTimeout: see CoordinatorConfig.ProbeTimeout; default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// AutoFailback: see CoordinatorConfig.AutoFailback.
	AutoFailback bool
	// Node is the template of every node's configuration; ID, Listen, PeerListen and
	// Coordinator are filled in per node.
	Node NodeConfig
	// Logger receives the coordinator's and the nodes' log unless Node.Logger is set;
	// default discards.
	Logger *slog.Logger
	// Etcd, EtcdEndpoints and EtcdPrefix say where the cluster state lives (see
	// CoordinatorConfig.Etcd); with none, the cluster embeds a single-member etcd (temporary
	// directory, no fsync) that Close stops. Tests that start many clusters can share one
	// etcd with control.ForTest, each cluster under a key prefix of its own.
	Etcd          *clientv3.Client
	EtcdEndpoints []string
	EtcdPrefix    string
	// PeerFront, when set, is called with each node's id and peer address before the node
	// starts (again on a restart, with the same address) and returns the address the node
	// advertises for peer traffic (NodeConfig.PeerAdvertise): a test puts a proxy there.
	PeerFront func(id int32, peerAddr string) string
	// Credentials are every member's (coordinator, nodes and the embedded etcd); nil makes a
	// throwaway CA in memory and one member certificate of it, so the cluster's internal
	// traffic is mutual TLS with no setup (Cluster.Credentials returns them).
	Credentials *Credentials

	// coordDial is the coordinator's dial of a silent node's data port
	// (CoordinatorConfig.dial); tests only.
	coordDial func(network, addr string, timeout time.Duration) (net.Conn, error)
}

// Cluster is a Zaris store in one process: a coordinator and nodes on loopback TCP, each node
// with its own ports, driven through real sockets. Its churn methods are what the coordinator
// does on its own in a real deployment, made callable. Node ids start at 1.
//
// A Cluster is safe for concurrent use. Close ends every node and the coordinator and leaves
// no goroutine and no socket behind.
type Cluster struct {
	cfg     ClusterConfig
	backend *control.Backend // the etcd NewCluster opened, or nil
	certDir string           // the embedded etcd's certificate files, removed by Close

	coordMu sync.Mutex // protects coord
	coord   *Coordinator

	mu     sync.Mutex // protects nodes, addrs, nextID and closed
	nodes  map[int32]*Node
	addrs  map[int32][2]string // data and peer address of every node ever started
	nextID int32
	closed bool
}

// NewCluster starts a coordinator and cfg.Nodes nodes and returns once every segment has an
// owner and every node holds the first map.
func NewCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	cfg.Logger = orDiscard(cfg.Logger)
	if cfg.Node.Logger == nil {
		cfg.Node.Logger = cfg.Logger
	}
	if cfg.Credentials == nil {
		ca, err := NewCA("zaris in-process cluster")
		if err != nil {
			return nil, fmt.Errorf("store: cluster CA: %w", err)
		}
		if cfg.Credentials, err = ca.Member("member"); err != nil {
			return nil, fmt.Errorf("store: cluster CA: %w", err)
		}
	}
	cfg.Node.Credentials = cfg.Credentials
	var backend *control.Backend
	var certDir string
	if cfg.Etcd == nil {
		var err error
		opts := control.Options{Endpoints: cfg.EtcdEndpoints, Embed: throwawayEtcd}
		if len(opts.Endpoints) == 0 {
			// The embedded etcd takes the members' credentials too: only members reach it.
			if certDir, err = os.MkdirTemp("", "zaris-certs-"); err != nil {
				return nil, err
			}
			if opts.Embed.TLS, err = cfg.Credentials.writeFiles(certDir); err != nil {
				os.RemoveAll(certDir)
				return nil, err
			}
			opts.TLS = cfg.Credentials.ClientTLS()
		}
		backend, err = control.Open(ctx, opts)
		if err != nil {
			os.RemoveAll(certDir)
			return nil, fmt.Errorf("store: cluster: %w", err)
		}
		cfg.Etcd = backend.Client
	}
	coord, err := StartCoordinator(cfg.coordinatorConfig(""))
	if err != nil {
		if backend != nil {
			backend.Close()
		}
		os.RemoveAll(certDir)
		return nil, err
	}
	c := &Cluster{cfg: cfg, backend: backend, certDir: certDir, coord: coord, nodes: map[int32]*Node{}, addrs: map[int32][2]string{}}
	for range cfg.Nodes {
		c.nextID++
		if _, err := c.startNode(c.nextID); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := coord.WaitSettled(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("store: cluster did not come up: %w", err)
	}
	return c, nil
}

// StartCluster is NewCluster for tests: it fails t if the cluster does not come up within
// 30 s and closes the cluster when the test ends.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := NewCluster(ctx, cfg)
	if err != nil {
		t.Fatalf("store.StartCluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// coordinatorConfig is the configuration of the cluster's coordinator, listening on listen.
func (cfg ClusterConfig) coordinatorConfig(listen string) CoordinatorConfig {
	return CoordinatorConfig{
		Listen:            listen,
		InitialNodes:      cfg.Nodes,
		Segments:          cfg.Segments,
		ReplicationFactor: cfg.ReplicationFactor,
		Heartbeat:         cfg.Heartbeat,
		FailureTimeout:    cfg.FailureTimeout,
		ProbeTimeout:      cfg.ProbeTimeout,
		AutoFailback:      cfg.AutoFailback,
		Etcd:              cfg.Etcd,
		EtcdPrefix:        cfg.EtcdPrefix,
		Credentials:       cfg.Credentials,
		Logger:            cfg.Logger,
		dial:              cfg.coordDial,
	}
}

// StopCoordinator stops the coordinator abruptly, as a kill would: its state stays in etcd
// and the nodes keep their last map. RestartCoordinator starts it again.
func (c *Cluster) StopCoordinator() error { return c.Coordinator().Close() }

// RestartCoordinator starts a new coordinator on the stopped one's address with the same
// etcd: it loads the cluster state and continues the same cluster. The old one is stopped
// first if it still runs.
func (c *Cluster) RestartCoordinator() error {
	c.coordMu.Lock()
	defer c.coordMu.Unlock()
	_ = c.coord.Close()
	var coord *Coordinator
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		coord, err = StartCoordinator(c.cfg.coordinatorConfig(c.coord.Addr()))
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	c.coord = coord
	return nil
}

// startNode starts node id: on its old ports when it ran before (Restart), else on fresh
// loopback ports taken outside the kernel's ephemeral range, so that while a killed node is
// down no other socket of this or another process is given its port, and a client still
// dialling the old address reaches nothing rather than someone else's server. Callers hold
// c.mu.
func (c *Cluster) startNode(id int32) (*Node, error) {
	cfg := c.cfg.Node
	cfg.ID = id
	cfg.Coordinator = c.Coordinator().Addr()
	cfg.Etcd, cfg.EtcdPrefix = c.cfg.Etcd, c.cfg.EtcdPrefix
	a, restart := c.addrs[id]
	var n *Node
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if restart {
			cfg.Listen, cfg.PeerListen = a[0], a[1]
		} else {
			cfg.Listen, cfg.PeerListen = stablePort(), stablePort()
		}
		if c.cfg.PeerFront != nil {
			cfg.PeerAdvertise = c.cfg.PeerFront(id, cfg.PeerListen)
		}
		n, err = StartNode(cfg)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	c.nodes[id] = n
	c.addrs[id] = [2]string{n.Addr(), n.PeerAddr()}
	return n, nil
}

// stablePort returns a loopback address whose port lies below the kernel's ephemeral range
// (where listening on port 0 and outgoing connections take theirs), or port 0 when that
// range leaves no room below it. Ports are handed out in turn from a random start, so a
// process does not reuse a port soon and two processes rarely meet.
func stablePort() string {
	portsOnce.Do(func() {
		lo := 32768
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if v, err := strconv.Atoi(f[0]); err == nil {
					lo = v
				}
			}
		}
		portsSpan = lo - portsBase
		if portsSpan >= 1000 {
			portsNext.Store(int64(rand.IntN(portsSpan)))
		}
	})
	if portsSpan < 1000 {
		return "127.0.0.1:0"
	}
	port := portsBase + int(portsNext.Add(1)%int64(portsSpan))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// portsBase is the lowest port stablePort hands out.
const portsBase = 10000

var (
	portsOnce sync.Once
	portsSpan int          // ports available from portsBase up to the ephemeral range
	portsNext atomic.Int64 // the last port handed out, as an offset from portsBase
)

// Coordinator returns the cluster's coordinator.
func (c *Cluster) Coordinator() *Coordinator {
	c.coordMu.Lock()
	defer c.coordMu.Unlock()
	return c.coord
}

// Seeds returns the data addresses (host:port) of the running nodes, by node id.
func (c *Cluster) Seeds() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var seeds []string
	for _, id := range c.idsLocked() {
		seeds = append(seeds, c.nodes[id].Addr())
	}
	return seeds
}

// Nodes returns the ids of the running nodes in increasing order.
func (c *Cluster) Nodes() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idsLocked()
}

func (c *Cluster) idsLocked() []int32 {
	ids := make([]int32, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Addr returns the data address of node id, running or not ("" for a node never started).
func (c *Cluster) Addr(id int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[id][0]
}

// Node returns the running node id, or nil.
func (c *Cluster) Node(id int32) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// Credentials returns the members' credentials (ClusterConfig.Credentials).
func (c *Cluster) Credentials() *Credentials { return c.cfg.Credentials }

// Map returns the coordinator's current cluster map. The caller must not modify it.
func (c *Cluster) Map() *zaris.ClusterMap { return c.Coordinator().Map() }

// WaitFor polls the coordinator's map until cond holds or ctx ends.
func (c *Cluster) WaitFor(ctx context.Context, cond func(*zaris.ClusterMap) bool) error {
	coord := c.Coordinator()
	return coord.waitUntil(ctx, func() (bool, error) { return cond(coord.public), nil })
}

// WaitSettled waits until no churn is pending and every live node holds the current map.
func (c *Cluster) WaitSettled(ctx context.Context) error { return c.Coordinator().WaitSettled(ctx) }

// HoldChurn: see Coordinator.HoldChurn.
func (c *Cluster) HoldChurn() (release func()) { return c.Coordinator().HoldChurn() }

// SlowDown delays every answer of node id to the coordinator's pings and map pushes by d (0
// restores it), as a loaded machine or a long pause would; for tests. It reports whether the
// node is running.
func (c *Cluster) SlowDown(id int32, d time.Duration) bool {
	n := c.Node(id)
	if n != nil {
		n.slowness.Store(int64(d))
	}
	return n != nil
}

// Kill stops node id abruptly (listeners and connections closed at once, data gone), like
// kill -9. The coordinator notices on its next heartbeat and fails the node over. Kill returns
// once the node is stopped, not once it is failed over.
func (c *Cluster) Kill(id int32) error {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n == nil {
		return fmt.Errorf("store: node %d is not running", id)
	}
	return n.Close()
}

// Restart starts node id again on its old ports, empty, and returns once the coordinator
// admitted it. The node then catches up its segments as a learner before it serves any of
// them; Failback (or AutoFailback) gives it its preferred segments back.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if _, ok := c.addrs[id]; !ok || c.nodes[id] != nil {
		c.mu.Unlock()
		return fmt.Errorf("store: node %d is running or was never started", id)
	}
	n, err := c.startNode(id)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.waitRegistered(ctx, n)
}

func (c *Cluster) waitRegistered(ctx context.Context, n *Node) error {
	select {
	case <-n.Registered():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Failback hands node id its preferred segments back and returns when it owns them all.
func (c *Cluster) Failback(ctx context.Context, id int32) error {
	return c.Coordinator().Failback(ctx, id)
}

// Join starts a new node (scale-out) and returns its id once it owns its share of segments,
// each migrated to it (copy, cut-over, old owner answering Moved).
func (c *Cluster) Join(ctx context.Context) (int32, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	c.nextID++
	id := c.nextID
	n, err := c.startNode(id)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if err := c.waitRegistered(ctx, n); err != nil {
		return id, err
	}
	return id, c.Coordinator().WaitJoined(ctx, id)
}

// Leave drains node id (its copies move to the other nodes), takes it out of the map and
// stops it.
func (c *Cluster) Leave(ctx context.Context, id int32) error {
	if err := c.Coordinator().Leave(ctx, id); err != nil {
		return err
	}
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	delete(c.addrs, id)
	c.mu.Unlock()
	if n != nil {
		return n.Close()
	}
	return nil
}

// MigrateSegment moves segment seg to node to and returns when the move is complete.
func (c *Cluster) MigrateSegment(ctx context.Context, seg, to int32) error {
	return c.Coordinator().MigrateSegment(ctx, seg, to)
}

// Close stops every node and the coordinator and waits for all of their goroutines.
func (c *Cluster) Close() error {
	c.mu.Lock()
	c.closed = true
	nodes := c.nodes
	c.nodes = map[int32]*Node{}
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		errs = append(errs, n.Close())
	}
	errs = append(errs, c.Coordinator().Close())
	if c.backend != nil {
		c.backend.Close()
		os.RemoveAll(c.certDir)
	}
	return errors.Join(errs...)
}
