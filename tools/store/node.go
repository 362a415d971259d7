package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

// peerCallTimeout bounds one replication, push or ping call to a peer.
const peerCallTimeout = 500 * time.Millisecond

// retryPause is the pause before a node retries internal work that failed (a fetch, a
// registration, a replication to an unreachable peer) without a newer map to wait for.
const retryPause = 10 * time.Millisecond

// incarnations makes every node start unique, even two in one nanosecond.
var incarnations atomic.Int64

// Node is one storage node: it serves ZarisKv on its data port and the store's internal
// ZarisPeer service on its peer port, holds the segments its map gives it, replicates the
// writes of the segments it owns, and catches up the segments it is learning. A Node answers
// every request from its own current map and puts that map's epoch in the answer.
//
// A Node is safe for concurrent use. Close (the same as a crash) ends it.
type Node struct {
	cfg         NodeConfig
	incarnation int64
	coords      *coordinators
	ownEtcd     *clientv3.Client // the etcd client the node opened itself, or nil
	ctx         context.Context
	cancel      context.CancelFunc
	data        *server
	peer        *server
	pool        *connPool
	wg          sync.WaitGroup // background goroutines: registration, segment catch-up
	registered  chan struct{}
	closeOnce   sync.Once

	installMu sync.Mutex // serializes map installs
	current   atomic.Pointer[view]
	changed   atomic.Pointer[chan struct{}] // closed (and replaced) whenever a map is installed
	segs      atomic.Pointer[[]*segment]

	// slowness, in nanoseconds, delays every answer to the coordinator's ping and map push:
	// tests make a live node slow with it, as a loaded machine or a long pause would.
	slowness atomic.Int64
	// A stall (stall.go): stalled is closed when it ends at stallUntil; nil when none runs.
	stallMu    sync.Mutex
	stalled    chan struct{}
	stallUntil time.Time
	reg        atomic.Pointer[control.Registration] // the current etcd registration
	// live is the node's right to serve the segments it owns, earned by renewing its etcd
	// lease and measured on its own monotonic clock (control.Liveness). The coordinator
	// hands a node's segments to another only once the node confirmed the map that revoked
	// them or its etcd lease is gone, and the node's right ends before etcd expires the
	// lease, so a node the coordinator gave up on while alive (a stall, a partition) cannot
	// answer from a copy another owner has moved past.
	live *control.Liveness
	// rejoining is set while the node registers (again): it serves nothing until it holds
	// the map the coordinator answers its registration with.
	rejoining atomic.Bool
	clusterID atomic.Pointer[string] // the cluster this node registered with
	// committedEpoch is the highest epoch this node read as committed in etcd (committed).
	committedEpoch atomic.Int64
	// versionFloor is the least version this node issues, from its latest registration
	// (versionFloorOf): above every version issued before that registration.
	versionFloor atomic.Int64
	// leaseWaiters counts the requests waiting for a renewal (awaitLease).
	leaseWaiters atomic.Int32
	// cutoverWaiters counts the requests waiting in awaitHandoff (tests watch it).
	cutoverWaiters atomic.Int32
}

// errOtherCluster refuses peer traffic of another cluster (one whose node took over a port
// this cluster's node used before).
var errOtherCluster = errors.New("store: request from another cluster")

// sameCluster reports whether id is this node's cluster.
func (n *Node) sameCluster(id string) bool {
	mine := n.clusterID.Load()
	return mine != nil && *mine == id
}

// entry is one key's value and version, or a tombstone: the version of its delete.
type entry struct {
	value   []byte
	version int64
	deleted bool
}

// writeLock is a mutex whose taker can give up waiting for it (lockUnless). The zero
// value is unlocked.
type writeLock struct {
	mu   sync.Mutex
	held bool
	free chan struct{} // closed by the Unlock that ends the current hold
}

// lockUnless waits for the lock and takes it, unless stop or done is closed (or receives)
// first; it reports whether it took the lock.
func (l *writeLock) lockUnless(stop <-chan time.Time, done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if !l.held {
			l.held, l.free = true, make(chan struct{})
			l.mu.Unlock()
			return true
		}
		free := l.free
		l.mu.Unlock()
		select {
		case <-free:
		case <-stop:
			return false
		case <-done:
			return false
		}
	}
}

// Unlock releases the lock.
func (l *writeLock) Unlock() {
	l.mu.Lock()
	l.held = false
	close(l.free)
	l.mu.Unlock()
}

// segment is a node's copy of one segment.
type segment struct {
	// writeMu serializes the owner's writes to the segment, each held from the read of the
	// current value until every replica applied the write, and orders copies for learners
	// (Fetch) between writes.
	writeMu writeLock
	// writing is the epoch of the map the write holding writeMu was routed with, 0 when
	// none is in flight (see confirmedEpoch).
	writing atomic.Int64

	mu   sync.Mutex // protects everything below
	data map[string]entry
	// counter is the highest version the segment has seen (writes and deletes); it never goes
	// back, so a key deleted and written again gets a higher version.
	counter int64
	// stable is the version of the owner's latest write of the segment that every copy
	// applied (at the owner: acknowledged; at a copy: as the owner last said). Tombstones up
	// to it are collected, and an entry at or below it is never applied: every copy holds
	// that state or a later one, so such an entry is a late or duplicated message.
	stable int64
	// tombs lists the keys of the tombstones in data, for collection.
	tombs []string
	// registered holds the learners that fetched a copy from this node as owner; they receive
	// every later write.
	registered map[int32]bool
	// fetching is set while this node, as a learner, waits for a copy; writes forwarded
	// meanwhile are kept in buffer and applied over the copy.
	fetching    bool
	buffer      []*zarispeer.Entry
	syncedFrom  int32 // the owner whose copy this learner holds, or noOwner
	syncedEpoch int64 // the owner's epoch when it handed out that copy
	syncing     bool  // a catch-up goroutine runs for this segment
}

// resetSync forgets the learner copy's origin and the learners registered here, so a copy
// is fetched anew before this node reports one. Callers hold s.mu.
func (s *segment) resetSync() {
	s.syncedFrom = noOwner
	s.syncedEpoch = 0
	s.registered = nil
}

// apply writes e (a value or a tombstone) into the segment unless it is not newer than what
// the segment holds: the key has a later version (tombstones included), or e is at or below
// the stable version. So a late, resent or duplicated entry is a no-op. Callers hold s.mu.
func (s *segment) apply(e *zarispeer.Entry) {
	if s.data == nil {
		s.data = make(map[string]entry)
	}
	if e.Version <= s.stable {
		return
	}
	if cur, ok := s.data[string(e.Key)]; ok && cur.version > e.Version {
		return
	}
	if e.Deleted {
		s.data[string(e.Key)] = entry{version: e.Version, deleted: true}
		s.tombs = append(s.tombs, string(e.Key))
	} else {
		s.data[string(e.Key)] = entry{value: e.Value, version: e.Version}
	}
	s.counter = max(s.counter, e.Version)
}

// lookup returns the live entry of key: a tombstone counts as absent. Callers hold s.mu.
func (s *segment) lookup(key []byte) (entry, bool) {
	e, ok := s.data[string(key)]
	if !ok || e.deleted {
		return entry{}, false
	}
	return e, true
}

// collect raises the stable version to stable and drops the tombstones at or below it: every
// copy of the segment applied that state or a later one. Callers hold s.mu.
func (s *segment) collect(stable int64) {
	if stable <= s.stable {
		return
	}
	s.stable = stable
	s.counter = max(s.counter, stable)
	kept := s.tombs[:0]
	for _, k := range s.tombs {
		e, ok := s.data[k]
		switch {
		case !ok || !e.deleted:
			// written again (or already gone): nothing to collect
		case e.version <= stable:
			delete(s.data, k)
		default:
			kept = append(kept, k)
		}
	}
	clear(s.tombs[len(kept):])
	s.tombs = kept
}

// StartNode starts a node: it binds the data and peer ports, then registers with the
// coordinator in the background (retrying until the coordinator answers). Until it holds a
// map it answers Unavailable.
func StartNode(cfg NodeConfig) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:         cfg,
		incarnation: time.Now().UnixNano() + incarnations.Add(1),
		coords:      newCoordinators(cfg.Coordinator),
		live:        control.NewLiveness(cfg.Clock, cfg.LeaseTTL/10),
		pool:        newConnPool(peerCallTimeout, cfg.Credentials.clientTLS()),
		registered:  make(chan struct{}),
	}
	if cfg.Etcd == nil {
		cli, err := control.ConnectTLS(context.Background(), cfg.EtcdEndpoints, cfg.EtcdTLS, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("store: node %d: %w", cfg.ID, err)
		}
		n.cfg.Etcd, n.ownEtcd = cli, cli
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ch := make(chan struct{})
	n.changed.Store(&ch)

	w := wireHeader
	if cfg.Protocol == ProtocolJSON {
		w = wireJSON
	}
	dataCfg := serverConfig(cfg.maxMessage(), 1<<16, cfg.IdleTimeout)
	h := &kvHandler{n: n}
	kv := serveMultiGetInMemory(inMemory(zaris.NewZarisKvProcessor(h), dataCfg, "MultiGet", "MultiPut", "MultiDelete"), h)
	n.data, err = newServer(n.ctx, cfg.Listen, cfg.TLS, dataCfg, w, stallable{kv, n}, nil, cfg.Logger)
	if err != nil {
		n.cancel()
		n.closeEtcd()
		return nil, fmt.Errorf("store: node %d data port: %w", cfg.ID, err)
	}
	maxRequest := cfg.peerMaxRequest()
	n.peer, err = newServer(n.ctx, cfg.PeerListen, cfg.Credentials.serverTLS(), serverConfig(maxRequest, 1<<24, peerIdleTimeout),
		wireFramedBinary, stallable{zarispeer.NewZarisPeerProcessor(&peerHandler{n: n}), n},
		newPortLimits(maxRequest), cfg.Logger)
	if err != nil {
		n.data.close()
		n.cancel()
		n.closeEtcd()
		return nil, fmt.Errorf("store: node %d peer port: %w", cfg.ID, err)
	}
	n.wg.Add(1)
	go n.register()
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() int32 { return n.cfg.ID }

// Addr returns the node's data address (host:port), the one clients dial.
func (n *Node) Addr() string { return advertise(n.data.addr()) }

// PeerAddr returns the address the node's internal peer service is bound to (see
// NodeConfig.PeerAdvertise for the one it registers).
func (n *Node) PeerAddr() string { return advertise(n.peer.addr()) }

// Registered is closed once the coordinator accepted the node and the node holds a map.
func (n *Node) Registered() <-chan struct{} { return n.registered }

// Epoch returns the epoch of the node's current map (0 before it has one).
func (n *Node) Epoch() int64 {
	if v := n.current.Load(); v != nil {
		return v.epoch
	}
	return 0
}

// Close stops the node abruptly, like a crash: both listeners and every connection close at
// once, requests in flight get no answer, and the node's data is gone. Close returns after
// every goroutine of the node ended. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.pool.close()
		n.data.close()
		n.peer.close()
		n.wg.Wait()
		n.closeEtcd()
	})
	return nil
}

// closeEtcd closes the etcd client the node opened itself, if any.
func (n *Node) closeEtcd() {
	if n.ownEtcd != nil {
		_ = n.ownEtcd.Close()
	}
}

// advertise turns a bound address into one a peer can dial: an unspecified host (":7001",
// "0.0.0.0:7001") becomes loopback.
func advertise(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// register registers the node in etcd under a lease (control.Register), then with the
// coordinator (retrying until one answers), and serves until the lease is lost: then the node
// counts itself out of the cluster (the coordinator may have given its segments away) and
// registers again, catching up like a restarted node. Its right to serve never depends on
// the coordinator being up: only on its etcd lease.
func (n *Node) register() {
	defer n.wg.Done()
	host, port, err := splitHostPort(n.Addr())
	if err != nil {
		n.cfg.Logger.Error("bad data address", "addr", n.Addr(), "err", err)
		return
	}
	req := &zarispeer.RegisterRequest{
		NodeId: n.cfg.ID, Incarnation: n.incarnation, Host: host, Port: port, PeerAddr: n.PeerAddr(),
	}
	if n.cfg.PeerAdvertise != "" {
		req.PeerAddr = n.cfg.PeerAdvertise
	}
	value, _ := json.Marshal(nodeValue{Incarnation: n.incarnation, TTL: n.cfg.LeaseTTL})
	first := true
	for {
		// Registering (again) means this node counts itself out of the cluster: it stops
		// serving until it holds the map the coordinator answers with.
		n.rejoining.Store(true)
		n.live.Lost()
		reg, err := control.Register(n.ctx, n.cfg.Etcd, n.cfg.EtcdPrefix, n.cfg.ID, string(value), n.cfg.LeaseTTL, n.live)
		if err != nil {
			n.cfg.Logger.Warn("cannot register in etcd; trying again", "node", n.cfg.ID, "err", err)
			if !sleepCtx(n.ctx, 200*time.Millisecond) {
				return
			}
			continue
		}
		n.reg.Store(reg)
		pm, err := n.registerWithCoordinator(req, reg)
		if err != nil {
			_ = reg.Close(context.Background())
			if n.ctx.Err() != nil || errors.Is(err, errLeft) {
				return
			}
			continue // the lease was lost while the coordinator did not answer
		}
		n.clusterID.Store(&pm.ClusterId)
		n.versionFloor.Store(versionFloorOf(reg.Revision()))
		// Whatever this node held before, the coordinator now counts it as new: every copy it
		// learns is fetched again.
		for _, seg := range n.segments() {
			seg.mu.Lock()
			seg.resetSync()
			seg.mu.Unlock()
		}
		n.install(pm)
		n.rejoining.Store(false)
		n.cfg.Logger.Info("registered", "node", n.cfg.ID, "epoch", pm.Epoch)
		if first {
			close(n.registered)
			first = false
		}
		select {
		case <-n.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = reg.Close(ctx) // the key goes at once: the coordinator fails the node over
			cancel()
			return
		case <-reg.Done():
		}
		n.cfg.Logger.Warn("etcd lease lost; registering again", "node", n.cfg.ID, "err", reg.Err())
	}
}

// versionTermBits is how many low bits of a version count writes within one registration's
// term; the bits above hold the term, the etcd revision of the registration (versionFloorOf).
const versionTermBits = 32

// versionFloorOf returns the least version a node registered at etcd revision rev issues.
// Revisions only grow, whatever restarts (etcd keeps them), so every version issued before
// a registration, by any node, is below its floor: unless one term issued 2^32 versions of
// a segment, each version lies below the next term's floor. A segment's versions so never
// go back, even after every node restarted empty, and costs no etcd write beyond the
// registration.
func versionFloorOf(rev int64) int64 { return rev << versionTermBits }

// errLeft means the coordinator refused the node: it left the cluster.
var errLeft = errors.New("store: node left the cluster")

// registerWithCoordinator sends req to the coordinators until one admits the node, and
// returns the map it answered with; it gives up when reg's lease is lost or the node closes.
func (n *Node) registerWithCoordinator(req *zarispeer.RegisterRequest, reg *control.Registration) (*zarispeer.PeerMap, error) {
	for {
		var pm *zarispeer.PeerMap
		err := n.coords.call(n.pool, 2*time.Second, func(c thrift.TClient) error {
			var err error
			pm, err = zarispeer.NewZarisCoordinatorClient(c).Register(n.ctx, req)
			return err
		})
		if left := (*zarispeer.LeftCluster)(nil); errors.As(err, &left) {
			n.cfg.Logger.Warn("this node left the cluster; it serves nothing and can be stopped", "node", n.cfg.ID)
			return nil, errLeft
		}
		if err == nil {
			return pm, nil
		}
		select {
		case <-n.ctx.Done():
			return nil, n.ctx.Err()
		case <-reg.Done():
			return nil, reg.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// nodeValue is a node's registration in etcd, the value of its key.
type nodeValue struct {
	Incarnation int64         `json:"incarnation"`
	TTL         time.Duration `json:"ttl"`
}

// leased reports whether the node may serve the segments it owns: it is registered and its
// etcd lease's right to serve runs.
func (n *Node) leased() bool { return !n.rejoining.Load() && n.live.CanServe() }

// slow waits for the injected slowness (none outside tests), or until the node closes.
func (n *Node) slow() {
	if d := time.Duration(n.slowness.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-n.ctx.Done():
		}
	}
}

// confirmedEpoch is the epoch the node reports to the coordinator: that of its map, or,
// while a write routed with an older map is in flight on a segment the map puts in cut-over
// here, that write's epoch. The coordinator names a new owner only once the old one
// confirmed the cut-over, so a write the old owner began before it reaches every copy, or
// none, before another node owns the segment. A write stores its epoch in segment.writing
// before it last checks the map, so either it sees the cut-over map and sends nothing, or
// this sees the write (TestHandoff_CutoverConfirmedDuringAWriteKeepsItFromAnyCopy).
func (n *Node) confirmedEpoch() int64 {
	v := n.current.Load()
	if v == nil {
		return 0
	}
	e := v.epoch
	for s, seg := range n.segments() {
		if sv := &v.segs[s]; sv.cutover && sv.owner == n.cfg.ID {
			if w := seg.writing.Load(); w != 0 {
				e = min(e, w)
			}
		}
	}
	return e
}

// awaitConfirmed waits up to d for the writes that hold confirmedEpoch back to end, and
// returns confirmedEpoch.
func (n *Node) awaitConfirmed(d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for {
		e := n.confirmedEpoch()
		if e == n.Epoch() || !time.Now().Before(deadline) || !sleepCtx(n.ctx, time.Millisecond) {
			return e
		}
	}
}

// changedCh returns the channel closed by the next map install. Take it before reading the
// current map so no install is missed.
func (n *Node) changedCh() <-chan struct{} { return *n.changed.Load() }

func (n *Node) segments() []*segment {
	if p := n.segs.Load(); p != nil {
		return *p
	}
	return nil
}

// install makes pm the node's map if it is newer than the current one, and starts or stops
// per-segment work the new map asks for: learners fetch a copy. A node keeps the data of a
// segment it no longer holds (a node failed over while it was alive may be given its segment
// back intact); a copy it learns later replaces it.
func (n *Node) install(pm *zarispeer.PeerMap) bool {
	n.installMu.Lock()
	defer n.installMu.Unlock()
	cur := n.current.Load()
	if !n.sameCluster(pm.ClusterId) {
		return false
	}
	if cur != nil && (pm.Epoch <= cur.epoch || pm.SegmentCount != cur.segCount) {
		return false
	}
	if pm.SegmentCount <= 0 || len(pm.Segments) != int(pm.SegmentCount) {
		return false
	}
	v := newView(pm)
	segs := n.segments()
	if segs == nil {
		segs = make([]*segment, v.segCount)
		for i := range segs {
			segs[i] = &segment{data: make(map[string]entry), syncedFrom: noOwner}
		}
		n.segs.Store(&segs)
	}
	n.current.Store(v)
	old := n.changed.Load()
	ch := make(chan struct{})
	n.changed.Store(&ch)
	close(*old)

	me := n.cfg.ID
	for i := range v.segs {
		sv := &v.segs[i]
		seg := segs[i]
		seg.mu.Lock()
		switch {
		case sv.owner == me:
			for id := range seg.registered {
				if !sv.isLearner(id) {
					delete(seg.registered, id)
				}
			}
			seg.syncedFrom, seg.syncedEpoch = noOwner, 0
		case sv.isLearner(me):
			seg.registered = nil
			if sv.owner != noOwner && !seg.syncing && n.ctx.Err() == nil {
				seg.syncing = true
				n.wg.Add(1)
				go n.catchUp(int32(i), seg)
			}
		default: // a replica, or no copy at all
			seg.resetSync()
		}
		seg.mu.Unlock()
	}
	return true
}

// catchUp runs while this node is a learner of segment s: it fetches a copy from the owner
// (again whenever the owner changes) and reports to the coordinator that it holds one, until
// the coordinator makes it a replica or takes it off the segment.
func (n *Node) catchUp(s int32, seg *segment) {
	defer n.wg.Done()
	me := n.cfg.ID
	for {
		ch := n.changedCh()
		seg.mu.Lock()
		v := n.current.Load()
		sv := &v.segs[s]
		if n.ctx.Err() != nil || !sv.isLearner(me) {
			seg.syncing = false
			seg.mu.Unlock()
			return
		}
		synced := seg.syncedFrom == sv.owner && !seg.fetching
		syncedEpoch := seg.syncedEpoch
		seg.mu.Unlock()

		wait := 200 * time.Millisecond
		switch {
		case sv.owner == noOwner:
		case !synced:
			if err := n.fetch(v, s, seg); err != nil {
				n.cfg.Logger.Debug("fetch failed", "segment", s, "owner", sv.owner, "err", err)
				wait = retryPause
			} else {
				wait = 0
			}
		default:
			if n.reportSynced(s, sv.owner, syncedEpoch) {
				seg.mu.Lock()
				if seg.syncedFrom == sv.owner && seg.syncedEpoch == syncedEpoch {
					seg.syncedFrom, seg.syncedEpoch = noOwner, 0
				}
				seg.mu.Unlock()
				wait = 0
			}
		}
		if wait == 0 {
			continue
		}
		select {
		case <-n.ctx.Done():
		case <-ch:
		case <-time.After(wait):
		}
	}
}

// errRejected is a peer's refusal of a fetch or a write (its map disagrees).
var errRejected = errors.New("store: rejected by peer")

// fetch copies segment s from its owner in v, keeping writes the owner forwards meanwhile.
func (n *Node) fetch(v *view, s int32, seg *segment) error {
	owner := v.segs[s].owner
	addr := v.peerAddr[owner]
	seg.mu.Lock()
	seg.fetching = true
	seg.buffer = nil
	seg.syncedFrom = noOwner
	seg.mu.Unlock()

	var resp *zarispeer.FetchResponse
	err := n.pool.call(addr, 10*time.Second, func(c thrift.TClient) error {
		var err error
		resp, err = zarispeer.NewZarisPeerClient(c).Fetch(n.ctx, &zarispeer.FetchRequest{
			Learner: n.cfg.ID, Epoch: v.epoch, Segment: s, ClusterId: v.pm.ClusterId,
		})
		return err
	})
	if err == nil && resp.Status != zarispeer.PeerStatus_Ok {
		if resp.Status == zarispeer.PeerStatus_StaleReceiver {
			n.pushMap(addr, v.pm)
		}
		err = errRejected
	}
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if err != nil {
		seg.fetching = false
		seg.buffer = nil
		return err
	}
	// The copy holds every entry up to resp.Counter: the segment is stable there, so a
	// late or duplicated forwarded entry at or below it is refused.
	seg.data = make(map[string]entry, len(resp.Entries))
	seg.tombs = nil
	seg.stable = 0
	for _, e := range resp.Entries {
		seg.apply(e)
	}
	seg.counter = max(seg.counter, resp.Counter)
	seg.collect(resp.Counter)
	for _, e := range seg.buffer {
		seg.apply(e)
	}
	seg.fetching = false
	seg.buffer = nil
	seg.syncedFrom = owner
	seg.syncedEpoch = resp.Epoch
	return nil
}

// reportSynced tells the coordinator this learner holds a copy of segment s fetched from
// owner at the owner's epoch fetchEpoch. It reports whether the coordinator wants the copy
// fetched again.
func (n *Node) reportSynced(s, owner int32, fetchEpoch int64) (refetch bool) {
	err := n.coords.call(n.pool, time.Second, func(c thrift.TClient) error {
		resp, err := zarispeer.NewZarisCoordinatorClient(c).Synced(n.ctx, &zarispeer.SyncedRequest{
			NodeId: n.cfg.ID, Incarnation: n.incarnation, Segment: s, Owner: owner, FetchEpoch: fetchEpoch,
		})
		if err == nil {
			refetch = resp.Refetch
		}
		return err
	})
	if err != nil {
		n.cfg.Logger.Debug("synced report failed", "segment", s, "err", err)
	}
	return refetch
}

// pushMap sends pm to the peer at addr (a peer whose map is older than ours).
func (n *Node) pushMap(addr string, pm *zarispeer.PeerMap) {
	_ = n.pool.call(addr, peerCallTimeout, func(c thrift.TClient) error {
		_, err := zarispeer.NewZarisPeerClient(c).PushMap(n.ctx, pm, 0)
		return err
	})
}

// pullMap installs the map of the peer at addr (a peer whose map is newer than ours).
func (n *Node) pullMap(addr string) {
	var pm *zarispeer.PeerMap
	err := n.pool.call(addr, peerCallTimeout, func(c thrift.TClient) error {
		var err error
		pm, err = zarispeer.NewZarisPeerClient(c).GetPeerMap(n.ctx)
		return err
	})
	if err == nil {
		n.install(pm)
	}
}
