package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// ErrClosed is returned by the coordinator's and the cluster's methods after Close.
var ErrClosed = errors.New("store: closed")

// errIncarnation means a node answered a heartbeat as a process other than the one that
// registered: it restarted.
var errIncarnation = errors.New("store: node restarted")

// handoffKind says how ownership of a segment moves to a new owner.
type handoffKind int

const (
	// kindMigrate: the old owner's writes answer Migrating during a short cut-over, then the
	// new owner serves (join, leave, MigrateSegment).
	kindMigrate handoffKind = iota
	// kindFailback: ownership passes at once while the segment is marked transitioning, so
	// non-owners answer OwnershipChanging (a returning preferred primary).
	kindFailback
)

// segWant is where the coordinator drives one segment.
type segWant struct {
	members []int32 // the copies the segment should have; members[0] is the preferred primary
	owner   int32   // the owner to hand the segment to, or noOwner when nothing is pending
	kind    handoffKind
}

type syncKey struct{ seg, node int32 }

// ownerRef names one run of a node: the same id with another incarnation is a restarted
// process whose memory is gone.
type ownerRef struct {
	id          int32
	incarnation int64
}

// nodeRec is the coordinator's record of one registered node.
type nodeRec struct {
	info        *zarispeer.PeerNode
	incarnation int64
	alive       bool
	leaving     bool
	known       int64 // the newest epoch the node confirmed
	// lease is the etcd lease of the node's registration, ttl its TTL: the node serves only
	// while it holds it (see Node), so the key's deletion means it has stopped serving.
	lease    clientv3.LeaseID
	ttl      time.Duration
	revoking bool // the coordinator is revoking lease and waiting its TTL out
	// inherited is a revoke of this node's lease that a previous leader committed: it may
	// have revoked the lease after it lost the leadership, so the key's deletion (or its
	// absence at takeover) is waited out for the lease's TTL, not taken as a failure.
	inherited revokeIntent
	cancel    context.CancelFunc
	kick      chan struct{} // wakes the node's heartbeat loop to push a new map
}

func (r *nodeRec) dataAddr() string {
	return net.JoinHostPort(r.info.Host, strconv.Itoa(int(r.info.Port)))
}

// Coordinator owns the cluster map. It heartbeats every node, fails over a node that stops
// answering or whose etcd lease expired, pushes every new map to every node, and drives
// churn (join, failback, leave, migration) one step and one epoch at a time. Its state lives
// in etcd, committed before any node is told: while no coordinator runs, nodes keep serving
// their last map (their right to serve comes from their own etcd leases), but nothing fails
// over and no churn completes; the next coordinator continues where it stopped.
//
// A Coordinator is safe for concurrent use.
type Coordinator struct {
	cfg    CoordinatorConfig
	srv    *server
	pool   *connPool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // wakes the reconcile loop
	once   sync.Once

	// slowKept counts suspected nodes that answered the probe and were kept.
	slowKept atomic.Int64
	// failovers counts the failovers of each node id; for tests.
	failovers sync.Map // int32 -> *atomic.Int64

	mu          sync.Mutex // protects everything below
	m           *zarispeer.PeerMap
	public      *zaris.ClusterMap // publicMap(m)
	nodes       map[int32]*nodeRec
	want        []segWant
	synced      map[syncKey]int32 // learner copies reported complete, with the owner copied from
	learnerAt   map[syncKey]int64 // the epoch each current learner was (last) added in
	left        map[ownerRef]bool // node processes that left the cluster (Leave)
	lastOwner   []ownerRef        // per segment left without any copy: the owner it had last
	initialized bool
	changed     chan struct{}   // closed on every new map
	hold        chan struct{}   // while set, handoffs stop at their midpoint (HoldChurn)
	handingOff  map[int32]int32 // segments whose handoff runs in the background, to their old owners
	committed   control.State   // the state last committed to etcd
	stopErr     error           // why the coordinator stopped acting on its own

	states  *control.StateStore
	etcd    *clientv3.Client
	backend *control.Backend // the etcd connection the coordinator opened itself, or nil
}

// StartCoordinator starts a coordinator listening on cfg.Listen, with the cluster state
// kept in etcd (see CoordinatorConfig.Etcd). A cluster whose state etcd holds is continued:
// same cluster id and nodes, a new map at the next epoch, the churn in progress resumed.
// Otherwise the first map places the segments once cfg.InitialNodes nodes registered.
func StartCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cli, backend, err := openControl(cfg)
	if err != nil {
		return nil, err
	}
	states := control.NewStateStore(cli, cfg.EtcdPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	st, err := states.Load(ctx)
	cancel()
	if err != nil {
		if backend != nil {
			backend.Close()
		}
		return nil, fmt.Errorf("store: coordinator: %w", err)
	}
	c := &Coordinator{
		cfg:        cfg,
		pool:       newConnPool(min(cfg.FailureTimeout, time.Second), cfg.Credentials.clientTLS()),
		kick:       make(chan struct{}, 1),
		nodes:      make(map[int32]*nodeRec),
		want:       make([]segWant, cfg.Segments),
		synced:     make(map[syncKey]int32),
		learnerAt:  make(map[syncKey]int64),
		left:       make(map[ownerRef]bool),
		lastOwner:  make([]ownerRef, cfg.Segments),
		changed:    make(chan struct{}),
		handingOff: make(map[int32]int32),
		states:     states,
		etcd:       cli,
		backend:    backend,
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	m := &zarispeer.PeerMap{SegmentCount: cfg.Segments, Nodes: []*zarispeer.PeerNode{}, ClusterId: hex.EncodeToString(id[:])}
	for s := range cfg.Segments {
		m.Segments = append(m.Segments, &zarispeer.PeerSegment{ID: s, Replicas: []int32{}, Learners: []int32{}})
		c.want[s].owner = noOwner
	}
	c.m, c.public = m, publicMap(m)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if st.Revision != 0 {
		if err := c.restoreLocked(st); err != nil {
			c.cancel()
			if backend != nil {
				backend.Close()
			}
			return nil, err
		}
	}
	c.srv, err = newServer(c.ctx, cfg.Listen, cfg.Credentials.serverTLS(), serverConfig(coordMaxRequest, 1<<16, peerIdleTimeout),
		wireFramedBinary, zarispeer.NewZarisCoordinatorProcessor(&coordHandler{c: c}),
		newPortLimits(coordMaxRequest), cfg.Logger)
	if err != nil {
		c.cancel()
		if backend != nil {
			backend.Close()
		}
		return nil, fmt.Errorf("store: coordinator: %w", err)
	}
	// The nodes' registrations in etcd: a node restored as up whose registration is gone has
	// stopped serving and is failed over; from here on, watchNodes sees every one that goes.
	c.mu.Lock()
	gone, rev, err := c.adoptRegistrationsLocked()
	if err == nil && st.Revision != 0 {
		// A new map at the next epoch: the nodes take it over the previous coordinator's.
		err = c.publishLocked(cloneMap(c.m))
	}
	if err == nil {
		for _, r := range c.nodes {
			if r.alive && !slices.Contains(gone, r) {
				c.startMonitorLocked(r)
			}
		}
		for _, r := range gone {
			c.failAfterRevokeLocked(r, "no etcd registration")
		}
		if st.Revision != 0 {
			cfg.Logger.Info("cluster state loaded from etcd", "cluster", c.m.ClusterId, "epoch", c.m.Epoch, "nodes", len(c.nodes))
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("store: coordinator: %w", err)
	}
	c.wg.Add(1)
	go c.watchNodes(rev + 1)
	if st.Revision != 0 {
		c.wg.Add(1)
		go c.resume()
	}
	c.wg.Add(1)
	go c.reconcileLoop()
	return c, nil
}

// startMonitorLocked starts the heartbeat loop of rec. Callers hold c.mu.
func (c *Coordinator) startMonitorLocked(rec *nodeRec) {
	ctx, cancel := context.WithCancel(c.ctx)
	rec.cancel = cancel
	c.wg.Add(1)
	go c.monitor(ctx, rec)
}

// Addr returns the coordinator's address, host:port.
func (c *Coordinator) Addr() string { return advertise(c.srv.addr()) }

// Map returns the current cluster map. The caller must not modify it.
func (c *Coordinator) Map() *zaris.ClusterMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.public
}

// Close stops the coordinator and waits for its goroutines. Nodes keep serving their last map.
func (c *Coordinator) Close() error {
	c.once.Do(func() {
		c.cancel()
		c.pool.close()
		c.srv.close()
		c.wg.Wait()
		if c.backend != nil {
			c.backend.Close()
		}
	})
	return nil
}

// HoldChurn makes every handoff stop at its midpoint, until release is called: a migration
// once its old owner confirmed the cut-over (it answers writes Migrating, reads
// Unavailable), a failback once the map that marks it transitioning was pushed to every node
// (non-owners answer OwnershipChanging). Failover is never held. It
// lets a test or a demo observe those states for as long as it needs.
func (c *Coordinator) HoldChurn() (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold == nil {
		c.hold = make(chan struct{})
	}
	h := c.hold
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.hold == h {
				c.hold = nil
			}
			c.mu.Unlock()
			close(h)
		})
	}
}

func (c *Coordinator) kickReconcile() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// publishLocked makes m (an edited clone of c.m) the next map: it commits it to etcd with
// the rest of the coordinator's state, then wakes every node's heartbeat loop to push it. A
// failed commit stops the coordinator (commitLocked) and tells no node. Callers hold c.mu.
func (c *Coordinator) publishLocked(m *zarispeer.PeerMap) error {
	m.Epoch = c.m.Epoch + 1
	for s, sg := range m.Segments {
		w := c.want[s]
		sg.Migrating = sg.Cutover || (w.kind == kindMigrate && w.owner != noOwner && w.owner != ownerOf(sg))
	}
	if err := c.commitLocked(m); err != nil {
		return err
	}
	c.m, c.public = m, publicMap(m)
	close(c.changed)
	c.changed = make(chan struct{})
	for _, r := range c.nodes {
		if r.alive {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	}
	c.cfg.Logger.Debug("map published", "epoch", m.Epoch)
	return nil
}

// liveRecsLocked returns the records of the live nodes. Callers hold c.mu.
func (c *Coordinator) liveRecsLocked() []*nodeRec {
	var recs []*nodeRec
	for _, r := range c.nodes {
		if r.alive {
			recs = append(recs, r)
		}
	}
	return recs
}

func (c *Coordinator) liveLocked(id int32) bool {
	r := c.nodes[id]
	return r != nil && r.alive
}

// register admits a node (new, or restarting with a new incarnation) and returns the map.
func (c *Coordinator) register(req *zarispeer.RegisterRequest) (*zarispeer.PeerMap, error) {
	if req.NodeId <= 0 {
		return nil, fmt.Errorf("store: bad node id %d", req.NodeId)
	}
	reg, err := c.nodeRegistration(req.NodeId)
	if err != nil {
		return nil, err
	}
	if reg == nil || reg.value.Incarnation != req.Incarnation {
		return nil, fmt.Errorf("store: node %d (incarnation %d) is not registered in etcd", req.NodeId, req.Incarnation)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if c.left[ownerRef{req.NodeId, req.Incarnation}] {
		return nil, &zarispeer.LeftCluster{Message: fmt.Sprintf("node %d left the cluster; start a new process to join again", req.NodeId)}
	}
	old := c.nodes[req.NodeId]
	if old != nil && old.alive {
		if old.incarnation != req.Incarnation && old.dataAddr() != net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))) {
			// Another process of this node, elsewhere, may still run: the new registration
			// replaced its key in etcd, not its lease, so it may still serve. It is given
			// up on like a node that stopped answering (its lease revoked, the TTL waited
			// out) before this process is admitted; until then the node registers again.
			c.giveUpLocked(old, "another process registered as this node")
			return nil, fmt.Errorf("store: node %d: its process at %s is being failed over first", req.NodeId, old.dataAddr())
		}
		c.failLocked(old, "registered again")
	}
	rec := &nodeRec{
		info:        &zarispeer.PeerNode{ID: req.NodeId, Host: req.Host, Port: req.Port, PeerAddr: req.PeerAddr},
		incarnation: req.Incarnation,
		alive:       true,
		lease:       reg.lease,
		ttl:         reg.value.TTL,
		kick:        make(chan struct{}, 1),
	}
	c.nodes[req.NodeId] = rec
	m := cloneMap(c.m)
	i := slices.IndexFunc(m.Nodes, func(n *zarispeer.PeerNode) bool { return n.ID == req.NodeId })
	if i >= 0 {
		m.Nodes[i] = rec.info
	} else {
		m.Nodes = append(m.Nodes, rec.info)
		slices.SortFunc(m.Nodes, func(a, b *zarispeer.PeerNode) int { return int(a.ID - b.ID) })
	}
	switch {
	case !c.initialized:
		c.placeInitialLocked(m)
	case old == nil:
		c.planJoinLocked(req.NodeId)
	case c.cfg.AutoFailback:
		c.planFailbackLocked(req.NodeId)
	}
	if err := c.publishLocked(m); err != nil {
		return nil, err
	}
	c.startMonitorLocked(rec)
	c.kickReconcile()
	c.cfg.Logger.Info("node registered", "node", req.NodeId, "addr", rec.dataAddr(), "epoch", c.m.Epoch)
	return c.m, nil
}
