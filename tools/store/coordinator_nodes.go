package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clustron/zaris-go/tools/store/control"
)

// registration is a node's key in etcd: its value and the lease it lives under.
type registration struct {
	value nodeValue
	lease clientv3.LeaseID
}

// nodeRegistration reads node id's registration in etcd, nil if it has none.
func (c *Coordinator) nodeRegistration(id int32) (*registration, error) {
	ctx, cancel := context.WithTimeout(c.ctx, commitTimeout)
	defer cancel()
	resp, err := c.etcd.Get(ctx, control.NodeKey(c.cfg.EtcdPrefix, id))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return parseRegistration(resp.Kvs[0].Value, resp.Kvs[0].Lease), nil
}

func parseRegistration(value []byte, lease int64) *registration {
	r := &registration{lease: clientv3.LeaseID(lease)}
	if json.Unmarshal(value, &r.value) != nil {
		return nil
	}
	return r
}

// adoptRegistrationsLocked gives every node restored as up the lease of its current
// registration in etcd, and returns the nodes that have none any more (or one of another
// process) and whose recorded lease is gone: their right to serve has ended. A node whose
// key another process replaced while its recorded lease lives on may still serve: it is
// given up on (giveUpLocked). It returns the revision it read at. Callers hold c.mu.
func (c *Coordinator) adoptRegistrationsLocked() ([]*nodeRec, int64, error) {
	ctx, cancel := context.WithTimeout(c.ctx, commitTimeout)
	defer cancel()
	prefix := control.NodeKey(c.cfg.EtcdPrefix, 0)
	prefix = prefix[:len(prefix)-1]
	resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	regs := map[int32]*registration{}
	for _, kv := range resp.Kvs {
		id, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
		if err != nil {
			continue
		}
		if r := parseRegistration(kv.Value, kv.Lease); r != nil {
			regs[int32(id)] = r
		}
	}
	var gone []*nodeRec
	for id, rec := range c.nodes {
		if !rec.alive {
			continue
		}
		r := regs[id]
		if r != nil && r.value.Incarnation != rec.incarnation && rec.lease != 0 {
			if ttl, err := c.etcd.TimeToLive(ctx, rec.lease); err != nil || ttl.TTL > 0 {
				c.giveUpLocked(rec, "another process registered as this node")
				continue
			}
		}
		if r == nil || r.value.Incarnation != rec.incarnation {
			gone = append(gone, rec)
			continue
		}
		rec.lease, rec.ttl = r.lease, r.value.TTL
	}
	return gone, resp.Header.Revision, nil
}

// watchNodes watches the nodes' registrations in etcd from revision rev on: a key deleted
// under the lease of a live node's registration is that node's failure. When the lease
// expired, the node's right to serve ended before etcd deleted the key; when the node
// revoked it (it closed), it stopped serving first: either way it is failed over at once. A
// lease the coordinator revokes itself is waited out by revokeNodeLease instead.
func (c *Coordinator) watchNodes(rev int64) {
	defer c.wg.Done()
	prefix := control.NodeKey(c.cfg.EtcdPrefix, 0)
	prefix = prefix[:len(prefix)-1]
	for c.ctx.Err() == nil {
		wch := c.etcd.Watch(clientv3.WithRequireLeader(c.ctx), prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				c.cfg.Logger.Warn("watching the nodes' registrations", "err", err)
				if resp.CompactRevision > 0 {
					rev = resp.CompactRevision
				}
				break
			}
			rev = resp.Header.Revision + 1
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypeDelete || ev.PrevKv == nil {
					continue
				}
				id, err := strconv.Atoi(strings.TrimPrefix(string(ev.Kv.Key), prefix))
				if err != nil {
					continue
				}
				c.mu.Lock()
				rec := c.nodes[int32(id)]
				if rec != nil && rec.alive && !rec.revoking && rec.lease == clientv3.LeaseID(ev.PrevKv.Lease) {
					c.failAfterRevokeLocked(rec, "etcd lease gone")
				}
				c.mu.Unlock()
			}
		}
		sleepCtx(c.ctx, 100*time.Millisecond)
	}
}

// revokeNodeLease ends the etcd lease of a node the coordinator gave up on while it may be
// alive, then waits until the node's right to serve has certainly run out: the node measured
// it from a renewal sent before the revoke, so it ends within the lease's TTL of it. It
// reports false if the lease could not be revoked (etcd unreachable) or the coordinator
// closed.
func (c *Coordinator) revokeNodeLease(ctx context.Context, rec *nodeRec) bool {
	c.mu.Lock()
	lease, ttl := rec.lease, rec.ttl
	// A fenced commit of the intent first: a coordinator that no longer leads revokes
	// nothing, and one deposed after the commit (its revoke may still land) has told the next
	// leader to wait the lease's TTL out (failAfterRevokeLocked). From here on, the key's
	// deletion is this revoke's, not an expiry: watchNodes leaves the node be.
	rec.revoking = true
	err := c.persistLocked()
	rec.revoking = err == nil
	c.mu.Unlock()
	if err != nil {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, commitTimeout)
	_, err = c.etcd.Revoke(rctx, lease)
	cancel()
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		c.cfg.Logger.Warn("revoking a suspected node's lease failed", "node", rec.info.ID, "err", err)
		return false
	}
	return sleepCtx(ctx, ttl+10*time.Millisecond)
}

// failAfterRevokeLocked fails rec over for why, a registration that went: at once, unless a
// previous leader committed a revoke of that very lease (rec.inherited). That leader may have
// sent the revoke after it lost the leadership, an unknown moment before now, and the node
// serves until the TTL from its last renewal before the revoke: the failover waits the TTL
// from now, which covers it. Callers hold c.mu.
func (c *Coordinator) failAfterRevokeLocked(rec *nodeRec, why string) {
	intent := rec.inherited
	if intent.Lease == 0 || (rec.lease != 0 && clientv3.LeaseID(intent.Lease) != rec.lease) {
		c.failLocked(rec, why)
		return
	}
	c.cfg.Logger.Info("waiting out a lease a previous leader revoked", "node", rec.info.ID, "ttl", intent.TTL)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !sleepCtx(c.ctx, intent.TTL+10*time.Millisecond) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.nodes[rec.info.ID] == rec && rec.alive {
			c.failLocked(rec, why+" (revoked by a previous leader; its TTL waited out)")
		}
	}()
}
