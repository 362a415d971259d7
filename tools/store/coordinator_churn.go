package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

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
	err := c.persistLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
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
	err := c.persistLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.kickReconcile()
	return c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(to); err != nil {
			return false, err
		}
		return ownerOf(c.m.Segments[seg]) == to && c.settledSegLocked(int(seg)), nil
	})
}

// Leave drains node id: every segment copy it holds moves to another node (ownership first to
// an in-sync replica), then it is taken out of the map. A segment left without owner whose
// only copy is this process's (it was failed over while alive) counts as held: it comes back
// to the node and moves on, rather than being lost with the node. It returns when the node holds
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
		// A segment left without owner whose last owner is this process holds its only copy
		// here too: the segment comes back to it, then moves on like the others.
		holds := ownerOf(c.m.Segments[s]) == id || c.lastOwner[s] == ownerRef{id, c.nodes[id].incarnation}
		if !slices.Contains(w.members, id) && !holds {
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
		if holds {
			w.owner, w.kind = rest[0], kindMigrate
		}
	}
	err := c.persistLocked()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.kickReconcile()
	err = c.waitUntil(ctx, func() (bool, error) {
		if err := c.checkLiveLocked(id); err != nil {
			return false, err
		}
		inc := c.nodes[id].incarnation
		for s, sg := range c.m.Segments {
			if isMember(sg, id) || c.lastOwner[s] == (ownerRef{id, inc}) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	rec := c.nodes[id]
	if rec != nil {
		rec.alive = false
		rec.cancel()
		delete(c.nodes, id)
		c.left[ownerRef{id, rec.incarnation}] = true
	}
	m := cloneMap(c.m)
	m.Nodes = slices.DeleteFunc(m.Nodes, func(n *zarispeer.PeerNode) bool { return n.ID == id })
	err = c.publishLocked(m)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The node's heartbeat loop has stopped: hand it the map without it, so it answers Moved
	// for every segment rather than whatever its last map said (a revoked segment it would
	// answer Unavailable, which sends no client to a newer map).
	c.pushAll([]*nodeRec{rec}, m)
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
