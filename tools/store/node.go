package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

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
	// outcomesEvictedEarly counts the outcomes dropped inside their window (node_outcomes.go).
	outcomesEvictedEarly atomic.Int64

	// slowness, in nanoseconds, delays every answer to the coordinator's ping and map push:
	// tests make a live node slow with it, as a loaded machine or a long pause would.
	slowness atomic.Int64
	// A stall (node_stall.go): stalled is closed when it ends at stallUntil; nil when none runs.
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
	kv := serveGetWithCodec(serveMultiGetInMemory(inMemory(zaris.NewZarisKvProcessor(h), dataCfg, "MultiGet", "MultiPut", "MultiDelete"), h), h, dataCfg)
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
