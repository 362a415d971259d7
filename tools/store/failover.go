package store

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zarispeer"
)

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
				resp, err := zarispeer.NewZarisPeerClient(cl).Ping(ctx, m.Epoch, m.ClusterId)
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
