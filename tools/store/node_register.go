package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
	"github.com/clustron/zaris-go/tools/store/control"
)

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
