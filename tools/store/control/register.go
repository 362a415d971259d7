package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrLeaseLost means a node's lease is gone (expired or revoked): it is no longer
// registered and must not serve until it registers again.
var ErrLeaseLost = errors.New("control: node lease lost")

// NodeKey is the key a node registers under in the cluster under prefix.
func NodeKey(prefix string, node int32) string {
	return prefix + "nodes/" + strconv.Itoa(int(node))
}

// Registration is a node's presence in etcd: its key under a lease the node keeps alive.
// The key vanishing (the lease expired) is the coordinator's failure signal; each renewal's
// reply extends the node's Liveness.
type Registration struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID
	live  *Liveness
	ttl   time.Duration
	rev   int64 // etcd's revision of the registration's put

	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error

	stallUntil atomic.Int64 // UnixNano before which no renewal goes out (Stall)
}

// Stall sends no renewal for d, as a stopped process would not; for tests.
func (r *Registration) Stall(d time.Duration) {
	raiseTo(&r.stallUntil, time.Now().Add(d).UnixNano())
}

func raiseTo(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// Register grants a lease of ttl (whole seconds, at least 1), puts NodeKey(prefix, node) =
// value under it, and renews it every ttl/3 until Close or until the lease is lost,
// recording every renewal in live.
func Register(ctx context.Context, cli *clientv3.Client, prefix string, node int32, value string, ttl time.Duration, live *Liveness) (*Registration, error) {
	secs := max(int64(ttl/time.Second), 1)
	sent := live.Sending()
	grant, err := cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("register node %d: lease: %w", node, err)
	}
	put, err := cli.Put(ctx, NodeKey(prefix, node), value, clientv3.WithLease(grant.ID))
	if err != nil {
		_, _ = cli.Revoke(context.WithoutCancel(ctx), grant.ID)
		return nil, fmt.Errorf("register node %d: %w", node, err)
	}
	live.Renewed(sent, time.Duration(grant.TTL)*time.Second)
	r := &Registration{cli: cli, lease: grant.ID, live: live, ttl: time.Duration(secs) * time.Second,
		rev: put.Header.Revision, stop: make(chan struct{}), done: make(chan struct{})}
	go r.renew()
	return r, nil
}

// renew keeps the lease alive until Close or its loss.
func (r *Registration) renew() {
	defer close(r.done)
	interval := r.ttl / 3
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		}
		if d := time.Until(time.Unix(0, r.stallUntil.Load())); d > 0 {
			select {
			case <-r.stop:
				return
			case <-time.After(d):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		sent := r.live.Sending()
		resp, err := r.cli.KeepAliveOnce(ctx, r.lease)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			r.live.Lost()
			r.err = ErrLeaseLost
			return
		case err == nil:
			r.live.Renewed(sent, time.Duration(resp.TTL)*time.Second)
		}
		// Any other error: etcd unreachable for now. The right to serve runs down on its
		// own; the next tick tries again.
	}
}

// Revision is etcd's revision of the registration: every later registration in the same
// etcd, whatever restarted meanwhile (etcd's data kept), has a higher one.
func (r *Registration) Revision() int64 { return r.rev }

// Lease is the registration's lease.
func (r *Registration) Lease() clientv3.LeaseID { return r.lease }

// Done is closed when the registration ends: after Close, or once the lease is lost (Err
// then returns ErrLeaseLost).
func (r *Registration) Done() <-chan struct{} { return r.done }

// Err returns ErrLeaseLost once the lease is lost, nil otherwise.
func (r *Registration) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Close stops renewing and revokes the lease, so the node's key goes at once (a clean
// leave); the node's right to serve ends with it.
func (r *Registration) Close(ctx context.Context) error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	r.live.Lost()
	if r.err != nil {
		return nil
	}
	if _, err := r.cli.Revoke(ctx, r.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke node lease: %w", err)
	}
	return nil
}
