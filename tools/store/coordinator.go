package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarispeer"
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
	cancel      context.CancelFunc
	kick        chan struct{} // wakes the node's heartbeat loop to push a new map
}

func (r *nodeRec) dataAddr() string {
	return net.JoinHostPort(r.info.Host, strconv.Itoa(int(r.info.Port)))
}

// Coordinator owns the cluster map. It heartbeats every node, fails over a node that stops
// answering, pushes every new map to every node, and drives churn (join, failback, leave,
// migration) one step and one epoch at a time. It is the one component the cluster needs to
// stay up: without it nodes keep serving their last map, but nothing fails over and no churn
// completes. Its state lives in memory only.
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
	changed     chan struct{} // closed on every new map
	hold        chan struct{} // while set, handoffs stop at their midpoint (HoldChurn)
}

// StartCoordinator starts a coordinator listening on cfg.Listen. The first map places the
// segments once cfg.InitialNodes nodes registered.
func StartCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:       cfg,
		pool:      newConnPool(min(cfg.FailureTimeout, time.Second)),
		kick:      make(chan struct{}, 1),
		nodes:     make(map[int32]*nodeRec),
		want:      make([]segWant, cfg.Segments),
		synced:    make(map[syncKey]int32),
		learnerAt: make(map[syncKey]int64),
		left:      make(map[ownerRef]bool),
		lastOwner: make([]ownerRef, cfg.Segments),
		changed:   make(chan struct{}),
	}
	m := &zarispeer.PeerMap{SegmentCount: cfg.Segments, Nodes: []*zarispeer.PeerNode{}}
	for s := range cfg.Segments {
		m.Segments = append(m.Segments, &zarispeer.PeerSegment{ID: s, Replicas: []int32{}, Learners: []int32{}})
		c.want[s].owner = noOwner
	}
	c.m, c.public = m, publicMap(m)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.srv, err = newServer(c.ctx, cfg.Listen, nil, serverConfig(peerMaxMessage, 1<<24, peerIdleTimeout),
		wireFramedBinary, zarispeer.NewZarisCoordinatorProcessor(&coordHandler{c: c}), cfg.Logger)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("store: coordinator: %w", err)
	}
	c.wg.Add(1)
	go c.reconcileLoop()
	return c, nil
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
	})
	return nil
}

// HoldChurn makes every handoff stop at its midpoint, once its first map is out (the
// old owner answering Migrating to writes in a cut-over, or non-owners answering
// OwnershipChanging in a failback), until release is called. Failover is never held. It
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

// publishLocked makes m (an edited clone of c.m) the next map and wakes every node's
// heartbeat loop to push it. Callers hold c.mu.
func (c *Coordinator) publishLocked(m *zarispeer.PeerMap) {
	m.Epoch = c.m.Epoch + 1
	for s, sg := range m.Segments {
		w := c.want[s]
		sg.Migrating = sg.Cutover || (w.kind == kindMigrate && w.owner != noOwner && w.owner != ownerOf(sg))
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
		c.failLocked(old, "registered again")
	}
	rec := &nodeRec{
		info:        &zarispeer.PeerNode{ID: req.NodeId, Host: req.Host, Port: req.Port, PeerAddr: req.PeerAddr},
		incarnation: req.Incarnation,
		alive:       true,
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
	c.publishLocked(m)
	ctx, cancel := context.WithCancel(c.ctx)
	rec.cancel = cancel
	c.wg.Add(1)
	go c.monitor(ctx, rec)
	c.kickReconcile()
	c.cfg.Logger.Info("node registered", "node", req.NodeId, "addr", rec.dataAddr(), "epoch", c.m.Epoch)
	return c.m, nil
}

// placeInitialLocked places every segment once enough nodes registered: segment s is owned by
// the s-th node (round robin) and replicated on the next ones.
func (c *Coordinator) placeInitialLocked(m *zarispeer.PeerMap) {
	var ids []int32
	for id, r := range c.nodes {
		if r.alive {
			ids = append(ids, id)
		}
	}
	if len(ids) < c.cfg.InitialNodes {
		return
	}
	slices.Sort(ids)
	rf := min(c.cfg.ReplicationFactor, len(ids))
	for s, sg := range m.Segments {
		members := make([]int32, rf)
		for k := range rf {
			members[k] = ids[(s+k)%len(ids)]
		}
		c.want[s] = segWant{members: members, owner: noOwner}
		setOwner(sg, members[0])
		sg.Replicas = slices.Clone(members[1:])
		sg.Learners = []int32{}
	}
	c.initialized = true
}

// planJoinLocked gives a new node an equal share of preferred primaries, taken from the nodes
// with the most; each moved segment migrates to it and its old owner drops its copy.
func (c *Coordinator) planJoinLocked(id int32) {
	count := map[int32]int{}
	live := 0
	for nid, r := range c.nodes {
		if r.alive && !r.leaving {
			count[nid] = 0
			live++
		}
	}
	for _, w := range c.want {
		if len(w.members) > 0 {
			if _, ok := count[w.members[0]]; ok {
				count[w.members[0]]++
			}
		}
	}
	target := int(c.cfg.Segments) / live
	for range target {
		from, most := noOwner, 0
		for nid, n := range count {
			if nid != id && (n > most || (n == most && nid < from)) {
				from, most = nid, n
			}
		}
		if from == noOwner || most <= count[id]+1 {
			return
		}
		for s := len(c.want) - 1; s >= 0; s-- {
			w := &c.want[s]
			if len(w.members) == 0 || w.members[0] != from || slices.Contains(w.members, id) {
				continue
			}
			members := append([]int32{id}, w.members[1:]...)
			if len(members) < c.cfg.ReplicationFactor {
				members = append(members, from)
			}
			*w = segWant{members: members, owner: id, kind: kindMigrate}
			count[from]--
			count[id]++
			break
		}
	}
}

// planFailbackLocked asks for every segment whose preferred primary is id to be handed back
// to it, and returns those segments.
func (c *Coordinator) planFailbackLocked(id int32) []int32 {
	var segs []int32
	for s := range c.want {
		w := &c.want[s]
		if len(w.members) > 0 && w.members[0] == id {
			segs = append(segs, int32(s))
			if ownerOf(c.m.Segments[s]) != id {
				w.owner, w.kind = id, kindFailback
			}
		}
	}
	return segs
}

// monitor is a node's heartbeat loop: every Heartbeat it pings the node, or pushes the map
// when the node is behind. A failed call fails the node over at once if its data port then
// refuses a connection, and otherwise once FailureTimeout passed since its last answer.
func (c *Coordinator) monitor(ctx context.Context, rec *nodeRec) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.Heartbeat)
	defer t.Stop()
	lastOK := time.Now()
	known := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rec.kick:
		}
		c.mu.Lock()
		m := c.m
		c.mu.Unlock()
		var err error
		if known < m.Epoch {
			err = c.pool.call(rec.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				e, err := zarispeer.NewZarisPeerClient(cl).PushMap(ctx, m)
				known = e
				return err
			})
		} else {
			err = c.pool.call(rec.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				resp, err := zarispeer.NewZarisPeerClient(cl).Ping(ctx, m.Epoch)
				if err != nil {
					return err
				}
				if resp.Incarnation != rec.incarnation {
					return errIncarnation
				}
				known = resp.Epoch
				return nil
			})
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			lastOK = time.Now()
			c.mu.Lock()
			rec.known = max(rec.known, known)
			behind := known < c.m.Epoch
			c.mu.Unlock()
			if behind {
				select {
				case rec.kick <- struct{}{}:
				default:
				}
			}
			continue
		}
		if errors.Is(err, errIncarnation) || !probe(rec.dataAddr(), min(c.cfg.FailureTimeout/2, time.Second)) ||
			time.Since(lastOK) > c.cfg.FailureTimeout {
			c.mu.Lock()
			if c.nodes[rec.info.ID] == rec && rec.alive {
				c.failLocked(rec, err.Error())
			}
			c.mu.Unlock()
			return
		}
	}
}

// probe reports whether something accepts connections at addr.
func probe(addr string, timeout time.Duration) bool {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// failLocked fails a node over: every segment it owned goes to a replica (the preferred
// primary or the pending handoff target when it is one), it leaves every segment, and the new
// map goes out at once. Callers hold c.mu.
func (c *Coordinator) failLocked(rec *nodeRec, why string) {
	id := rec.info.ID
	rec.alive = false
	if rec.cancel != nil {
		rec.cancel()
	}
	for k := range c.synced {
		if k.node == id {
			delete(c.synced, k)
		}
	}
	for k := range c.learnerAt {
		if k.node == id {
			delete(c.learnerAt, k)
		}
	}
	m := cloneMap(c.m)
	for s, sg := range m.Segments {
		w := &c.want[s]
		if w.owner == id {
			w.owner = noOwner
		}
		sg.Replicas = remove(sg.Replicas, id)
		sg.Learners = remove(sg.Learners, id)
		if ownerOf(sg) != id {
			continue
		}
		next := noOwner
		for _, cand := range []int32{w.owner, firstOr(w.members, noOwner)} {
			if cand != noOwner && slices.Contains(sg.Replicas, cand) {
				next = cand
				break
			}
		}
		if next == noOwner && len(sg.Replicas) > 0 {
			next = sg.Replicas[0]
		}
		setOwner(sg, next)
		sg.Replicas = remove(sg.Replicas, next)
		sg.Cutover, sg.Transitioning = false, false
		if next == noOwner {
			// No copy is left. If this very process comes back (it was failed over while
			// alive), its data is intact and it takes the segment back.
			c.lastOwner[s] = ownerRef{id: id, incarnation: rec.incarnation}
		}
		if w.owner == next {
			w.owner = noOwner
		}
	}
	c.publishLocked(m)
	c.pool.drop(rec.info.PeerAddr)
	c.kickReconcile()
	c.cfg.Logger.Info("node failed over", "node", id, "why", why, "epoch", c.m.Epoch)
}

func firstOr(list []int32, def int32) int32 {
	if len(list) == 0 {
		return def
	}
	return list[0]
}

// restartOwnerlessLocked picks the node that takes a segment without any copy: the process
// that owned it last, if it is live again with its memory; otherwise, once that process is
// known to be gone (it came back as a new incarnation, or it never owned it), the first live
// wanted member, starting the segment afresh: its data was lost with its last copy. While the
// last owner may still come back, the segment stays without owner (Unavailable).
func (c *Coordinator) restartOwnerlessLocked(s int) (int32, bool) {
	if last := c.lastOwner[s]; last.id != 0 {
		r := c.nodes[last.id]
		if r == nil || !r.alive {
			return noOwner, false
		}
		if r.incarnation == last.incarnation {
			return last.id, true
		}
	}
	for _, id := range c.want[s].members {
		if c.liveLocked(id) {
			return id, true
		}
	}
	return noOwner, false
}

func (c *Coordinator) reconcileLoop() {
	defer c.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		for c.ctx.Err() == nil && c.reconcileOnce() {
		}
	}
}

// reconcileOnce moves the map one step towards c.want: it gives an ownerless segment a live
// member, adds missing members as learners, promotes learners that hold a full copy,
// drops copies no longer wanted once the wanted ones are in sync, and runs pending handoffs.
// It reports whether it changed anything.
func (c *Coordinator) reconcileOnce() bool {
	c.mu.Lock()
	if !c.initialized {
		c.mu.Unlock()
		return false
	}
	m := cloneMap(c.m)
	changed := false
	for s, sg := range m.Segments {
		w := &c.want[s]
		if ownerOf(sg) == noOwner {
			if id, ok := c.restartOwnerlessLocked(s); ok {
				setOwner(sg, id)
				sg.Replicas, sg.Learners = remove(sg.Replicas, id), remove(sg.Learners, id)
				delete(c.learnerAt, syncKey{int32(s), id})
				c.lastOwner[s] = ownerRef{}
				changed = true
			}
		}
		owner := ownerOf(sg)
		if owner == noOwner {
			continue
		}
		for _, id := range w.members {
			if c.liveLocked(id) && !isMember(sg, id) {
				sg.Learners = append(sg.Learners, id)
				c.learnerAt[syncKey{int32(s), id}] = c.m.Epoch + 1 // the epoch of the map published below
				delete(c.synced, syncKey{int32(s), id})
				changed = true
			}
		}
		for _, id := range slices.Clone(sg.Learners) {
			if from, ok := c.synced[syncKey{int32(s), id}]; ok && from == owner {
				sg.Learners = remove(sg.Learners, id)
				sg.Replicas = append(sg.Replicas, id)
				delete(c.synced, syncKey{int32(s), id})
				delete(c.learnerAt, syncKey{int32(s), id})
				changed = true
			}
		}
		inSync := true
		for _, id := range w.members {
			if c.liveLocked(id) && id != owner && !slices.Contains(sg.Replicas, id) {
				inSync = false
			}
		}
		if inSync {
			for _, id := range append(slices.Clone(sg.Replicas), sg.Learners...) {
				if !slices.Contains(w.members, id) {
					sg.Replicas, sg.Learners = remove(sg.Replicas, id), remove(sg.Learners, id)
					delete(c.learnerAt, syncKey{int32(s), id})
					changed = true
				}
			}
		}
	}
	if changed {
		c.publishLocked(m)
	}
	var picks []int32
	for s, sg := range c.m.Segments {
		w := &c.want[s]
		if w.owner == noOwner {
			continue
		}
		if w.owner == ownerOf(sg) && !sg.Cutover && !sg.Transitioning {
			w.owner = noOwner
			continue
		}
		if c.handoffReadyLocked(int32(s)) {
			picks = append(picks, int32(s))
		}
	}
	c.mu.Unlock()
	for _, s := range picks {
		c.handoff(s)
	}
	return changed || len(picks) > 0
}

// handoffReadyLocked reports whether segment s can be handed to its wanted owner now: both
// ends live, the target an in-sync replica, and no handoff of s in flight.
func (c *Coordinator) handoffReadyLocked(s int32) bool {
	sg := c.m.Segments[s]
	w := c.want[s]
	o := ownerOf(sg)
	return w.owner != noOwner && o != noOwner && w.owner != o && c.liveLocked(o) && c.liveLocked(w.owner) &&
		slices.Contains(sg.Replicas, w.owner) && !sg.Cutover && !sg.Transitioning
}

// handoff moves segment s to its wanted owner in two maps. Migration: first a cut-over
// (writes answer Migrating while the owner finishes those in flight), then the new owner;
// the old owner keeps a copy only if it is still wanted, else it answers Moved. Failback:
// first the new owner with the segment marked transitioning (non-owners answer
// OwnershipChanging) pushed to every node, then the mark cleared. The target is an in-sync
// replica, and a replica only applies writes from the owner its own map names, so no
// acknowledged write is lost whichever order the nodes learn the maps in.
func (c *Coordinator) handoff(s int32) {
	c.mu.Lock()
	if !c.handoffReadyLocked(s) {
		c.mu.Unlock()
		return
	}
	w := c.want[s]
	from, to := ownerOf(c.m.Segments[s]), w.owner
	m1 := cloneMap(c.m)
	s1 := m1.Segments[s]
	if w.kind == kindFailback {
		setOwner(s1, to)
		s1.Replicas = append(remove(s1.Replicas, to), from)
		s1.Transitioning = true
	} else {
		s1.Cutover = true
	}
	c.publishLocked(m1)
	recs := []*nodeRec{c.nodes[from]}
	if w.kind == kindFailback {
		recs = nil
		for _, r := range c.nodes {
			if r.alive {
				recs = append(recs, r)
			}
		}
	}
	hold := c.hold
	c.mu.Unlock()

	c.pushAll(recs, m1)
	if hold != nil {
		select {
		case <-hold:
		case <-c.ctx.Done():
			return
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	sg := c.m.Segments[s]
	if w.kind == kindFailback {
		if ownerOf(sg) != to || !sg.Transitioning {
			return // a failover intervened and already cleared the mark
		}
		m2 := cloneMap(c.m)
		m2.Segments[s].Transitioning = false
		c.want[s].owner = noOwner
		c.publishLocked(m2)
		return
	}
	if ownerOf(sg) != from || !sg.Cutover {
		return
	}
	m2 := cloneMap(c.m)
	s2 := m2.Segments[s]
	s2.Cutover = false
	if c.liveLocked(to) && slices.Contains(s2.Replicas, to) {
		setOwner(s2, to)
		s2.Replicas = remove(s2.Replicas, to)
		if slices.Contains(c.want[s].members, from) {
			s2.Replicas = append(s2.Replicas, from)
		}
		c.want[s].owner = noOwner
	}
	c.publishLocked(m2)
}

// pushAll pushes m to the given nodes in parallel and waits (each at most FailureTimeout).
func (c *Coordinator) pushAll(recs []*nodeRec, m *zarispeer.PeerMap) {
	var wg sync.WaitGroup
	for _, r := range recs {
		if r == nil {
			continue
		}
		wg.Go(func() {
			var e int64
			err := c.pool.call(r.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				var err error
				e, err = zarispeer.NewZarisPeerClient(cl).PushMap(c.ctx, m)
				return err
			})
			if err == nil {
				c.mu.Lock()
				r.known = max(r.known, e)
				c.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// waitUntil re-evaluates cond under c.mu after every new map (and at least every 50 ms)
// until it reports done or an error, ctx ends, or the coordinator closes.
func (c *Coordinator) waitUntil(ctx context.Context, cond func() (bool, error)) error {
	for {
		c.mu.Lock()
		done, err := cond()
		ch := c.changed
		c.mu.Unlock()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return ErrClosed
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Coordinator) checkLiveLocked(id int32) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	if !c.liveLocked(id) {
		return fmt.Errorf("store: node %d is not live", id)
	}
	return nil
}

// settledSegLocked reports whether segment s has reached its wanted state as far as live
// nodes allow: no handoff pending or in flight, every live wanted member in sync, no extra copy.
func (c *Coordinator) settledSegLocked(s int) bool {
	sg := c.m.Segments[s]
	w := c.want[s]
	if w.owner != noOwner || sg.Cutover || sg.Transitioning || len(sg.Learners) > 0 {
		return false
	}
	for _, id := range w.members {
		if c.liveLocked(id) && !isMember(sg, id) {
			return false
		}
	}
	for _, id := range sg.Replicas {
		if !slices.Contains(w.members, id) {
			return false
		}
	}
	return true
}

// Failback hands node id its preferred segments back (it must be live; its copies catch up
// first) and returns when it owns all of them.
func (c *Coordinator) Failback(ctx context.Context, id int32) error {
	c.mu.Lock()
	if err := c.checkLiveLocked(id); err != nil {
		c.mu.Unlock()
		return err
	}
	segs := c.planFailbackLocked(id)
	c.mu.Unlock()
	c.kickReconcile()
	return c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(id); err != nil {
			return false, err
		}
		for _, s := range segs {
			if sg := c.m.Segments[s]; ownerOf(sg) != id || sg.Transitioning {
				return false, nil
			}
		}
		return true, nil
	})
}

// MigrateSegment moves segment seg to node to (copy while the owner serves, a short cut-over,
// then the old owner answers Moved) and makes to its preferred primary. The old owner drops
// its copy, unless to was the segment's replica: then the old owner takes its place as replica
// (and answers writes ReplicaWriteRejected, reads Moved). It returns when the move is
// complete.
func (c *Coordinator) MigrateSegment(ctx context.Context, seg, to int32) error {
	c.mu.Lock()
	if seg < 0 || seg >= c.cfg.Segments {
		c.mu.Unlock()
		return fmt.Errorf("store: no segment %d", seg)
	}
	if err := c.checkLiveLocked(to); err != nil {
		c.mu.Unlock()
		return err
	}
	if !c.initialized {
		c.mu.Unlock()
		return errors.New("store: cluster not placed yet")
	}
	owner := ownerOf(c.m.Segments[seg])
	w := &c.want[seg]
	members := []int32{to}
	for _, id := range w.members {
		if id != to && id != owner {
			members = append(members, id)
		}
	}
	if len(members) < c.cfg.ReplicationFactor && owner != to && owner != noOwner {
		members = append(members, owner)
	}
	members = members[:min(len(members), c.cfg.ReplicationFactor)]
	*w = segWant{members: members, owner: to, kind: kindMigrate}
	if owner == to {
		w.owner = noOwner
	}
	c.mu.Unlock()
	c.kickReconcile()
	return c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(to); err != nil {
			return false, err
		}
		return ownerOf(c.m.Segments[seg]) == to && c.settledSegLocked(int(seg)), nil
	})
}

// Leave drains node id: every segment copy it holds moves to another node (ownership first to
// an in-sync replica), then it is taken out of the map. It returns when the node holds
// nothing; the node may then be stopped.
func (c *Coordinator) Leave(ctx context.Context, id int32) error {
	c.mu.Lock()
	if err := c.checkLiveLocked(id); err != nil {
		c.mu.Unlock()
		return err
	}
	c.nodes[id].leaving = true
	load := map[int32]int{}
	for nid, r := range c.nodes {
		if r.alive && !r.leaving {
			load[nid] = 0
		}
	}
	for _, w := range c.want {
		for _, m := range w.members {
			if _, ok := load[m]; ok {
				load[m]++
			}
		}
	}
	for s := range c.want {
		w := &c.want[s]
		if !slices.Contains(w.members, id) && ownerOf(c.m.Segments[s]) != id {
			continue
		}
		rest := remove(slices.Clone(w.members), id)
		repl, least := noOwner, 0
		for nid, n := range load {
			if !slices.Contains(rest, nid) && (repl == noOwner || n < least || (n == least && nid < repl)) {
				repl, least = nid, n
			}
		}
		if repl != noOwner {
			rest = append(rest, repl)
			load[repl]++
		}
		if len(rest) == 0 {
			c.nodes[id].leaving = false
			c.mu.Unlock()
			return fmt.Errorf("store: node %d is the only node left; it cannot leave", id)
		}
		*w = segWant{members: rest, owner: noOwner}
		if ownerOf(c.m.Segments[s]) == id {
			w.owner, w.kind = rest[0], kindMigrate
		}
	}
	c.mu.Unlock()
	c.kickReconcile()
	err := c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(id); err != nil {
			return false, err
		}
		for _, sg := range c.m.Segments {
			if isMember(sg, id) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec := c.nodes[id]; rec != nil {
		rec.alive = false
		rec.cancel()
		delete(c.nodes, id)
		c.left[ownerRef{id, rec.incarnation}] = true
	}
	m := cloneMap(c.m)
	m.Nodes = slices.DeleteFunc(m.Nodes, func(n *zarispeer.PeerNode) bool { return n.ID == id })
	c.publishLocked(m)
	return nil
}

// WaitJoined waits until node id owns every segment the coordinator planned for it.
func (c *Coordinator) WaitJoined(ctx context.Context, id int32) error {
	return c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(id); err != nil {
			return false, err
		}
		for s, w := range c.want {
			if len(w.members) > 0 && w.members[0] == id && (ownerOf(c.m.Segments[s]) != id || !c.settledSegLocked(s)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// WaitSettled waits until no churn is pending or in flight, every live node's copies are in
// sync, and every live node holds the current map.
func (c *Coordinator) WaitSettled(ctx context.Context) error {
	return c.waitUntil(ctx, func() (bool, error) {
		if !c.initialized {
			return false, nil
		}
		for s := range c.want {
			if !c.settledSegLocked(s) {
				return false, nil
			}
		}
		for _, r := range c.nodes {
			if r.alive && r.known < c.m.Epoch {
				return false, nil
			}
		}
		return true, nil
	})
}

// WaitNode waits until node id is registered and live (live is true) or failed over (false).
func (c *Coordinator) WaitNode(ctx context.Context, id int32, live bool) error {
	return c.waitUntil(ctx, func() (bool, error) { return c.liveLocked(id) == live, nil })
}

// coordHandler serves the ZarisCoordinator service.
type coordHandler struct{ c *Coordinator }

var _ zarispeer.ZarisCoordinator = (*coordHandler)(nil)

// adminTimeout bounds a churn command that arrives over the wire.
const adminTimeout = 60 * time.Second

// Register admits a node.
func (h *coordHandler) Register(_ context.Context, req *zarispeer.RegisterRequest) (*zarispeer.PeerMap, error) {
	return h.c.register(req)
}

// Synced records that a learner holds a full copy of a segment. A copy handed out before
// the learner's latest addition to the segment may miss writes (the owner stops forwarding to
// a node that leaves the segment), so that learner is told to fetch again.
func (h *coordHandler) Synced(_ context.Context, req *zarispeer.SyncedRequest) (*zarispeer.SyncedResponse, error) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &zarispeer.SyncedResponse{}
	rec := c.nodes[req.NodeId]
	if rec == nil || !rec.alive || rec.incarnation != req.Incarnation || req.Segment < 0 || req.Segment >= c.cfg.Segments {
		return resp, nil
	}
	sg := c.m.Segments[req.Segment]
	key := syncKey{req.Segment, req.NodeId}
	if !slices.Contains(sg.Learners, req.NodeId) || ownerOf(sg) != req.Owner {
		return resp, nil
	}
	if req.FetchEpoch < c.learnerAt[key] {
		resp.Refetch = true
		return resp, nil
	}
	c.synced[key] = req.Owner
	c.kickReconcile()
	return resp, nil
}

// GetMap returns the current map.
func (h *coordHandler) GetMap(_ context.Context) (*zarispeer.PeerMap, error) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.m, nil
}

func (h *coordHandler) admin(ctx context.Context, op func(context.Context) error) (*zarispeer.PeerMap, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	if err := op(ctx); err != nil {
		return nil, err
	}
	return h.GetMap(ctx)
}

// Failback runs Coordinator.Failback.
func (h *coordHandler) Failback(ctx context.Context, id int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.Failback(ctx, id) })
}

// Leave runs Coordinator.Leave.
func (h *coordHandler) Leave(ctx context.Context, id int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.Leave(ctx, id) })
}

// MigrateSegment runs Coordinator.MigrateSegment.
func (h *coordHandler) MigrateSegment(ctx context.Context, seg, to int32) (*zarispeer.PeerMap, error) {
	return h.admin(ctx, func(ctx context.Context) error { return h.c.MigrateSegment(ctx, seg, to) })
}
