package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/tools/store"
)

// churner carries out scheduled events against the store and remembers what it did, so
// that a failback targets the node that was killed (or lost) and a leave the node that
// joined.
type churner struct {
	cluster *store.Cluster
	initial []int32 // the nodes the cluster started with
	killed  []int32 // killed nodes and lost hosts, in order
	joined  []int32
	joins   int // the joins started, whether or not they succeeded
	// loss is what the map showed during the last stall or lost host.
	loss loss
}

// loss is what the store's map showed while a node stood still (a stall or a lost host),
// from the moment it stopped.
type loss struct {
	owned []int32 // the segments the node owned when it stopped
	// newOwner is when the first map that gives one of them to another node appeared;
	// failover when the node owned none; 0 if not seen by the end of the watch.
	newOwner, failover time.Duration
	// lostFor is how long a lost host stood still before it was replaced; 0 for a stall.
	lostFor time.Duration
}

// look notes what map m, seen at since after the node id stopped, shows.
func (l *loss) look(m *zaris.ClusterMap, id int32, since time.Duration) {
	owns, moved := false, false
	for _, s := range m.Segments {
		switch {
		case !s.IsSetOwner():
		case s.GetOwner() == id:
			owns = true
		case slices.Contains(l.owned, s.ID):
			moved = true
		}
	}
	if moved && l.newOwner == 0 {
		l.newOwner = max(since, time.Nanosecond)
	}
	if !owns && l.failover == 0 {
		l.failover = max(since, time.Nanosecond)
	}
}

// step is one event with its target chosen: what the demo does, and the label it names it
// by (in the progress line, the phase, the report and the page), such as "kill n3".
type step struct {
	kind     Kind
	node     int32 // the target node (for a join, the id the new node will get)
	seg      int32 // a migration's segment
	label    string
	planFail error // set when no target could be chosen
}

// plan chooses e's target now, before it runs, so that the event has its name from the
// start.
func (c *churner) plan(e Event) step {
	st := step{kind: e.Kind, node: e.Node}
	switch e.Kind {
	case Migrate:
		seg, to, err := c.migrationTarget(e.Node)
		st.seg, st.node, st.planFail = seg, to, err
		st.label = fmt.Sprintf("migrate seg %d → n%d", seg, to)
	case Join:
		// The store numbers nodes in order: the cluster's own, then each join's.
		st.node = slices.Max(c.initial) + int32(c.joins) + 1
	case Kill:
		if st.node == 0 {
			st.node = c.killTarget()
		}
	case Failback:
		if st.node == 0 && len(c.killed) == 0 {
			st.planFail = fmt.Errorf("no node was killed or lost before this failback")
		} else if st.node == 0 {
			st.node = c.killed[len(c.killed)-1]
		}
	case Leave:
		if st.node == 0 {
			st.node = c.leaveTarget()
		}
	case Stall, LostHost:
		if st.node == 0 {
			st.node = c.ownerTarget()
		}
	default:
		st.planFail = fmt.Errorf("unknown churn kind %q", e.Kind)
	}
	switch {
	case st.planFail != nil:
		st.label = string(e.Kind)
	case e.Kind == Stall:
		st.label = fmt.Sprintf("stall n%d %s", st.node, StallFor)
	case st.label == "":
		st.label = fmt.Sprintf("%s n%d", e.Kind, st.node)
	}
	return st
}

// do carries out the planned step st.
func (c *churner) do(ctx context.Context, st step) error {
	if st.planFail != nil {
		return st.planFail
	}
	switch st.kind {
	case Migrate:
		return c.cluster.MigrateSegment(ctx, st.seg, st.node)
	case Join:
		c.joins++
		id, err := c.cluster.Join(ctx)
		if id != 0 {
			c.joined = append(c.joined, id)
		}
		if err == nil && id != st.node {
			err = fmt.Errorf("the new node is n%d, not n%d as planned", id, st.node)
		}
		return err
	case Kill:
		c.killed = append(c.killed, st.node)
		return c.cluster.Kill(st.node)
	case Failback:
		if c.cluster.Node(st.node) == nil {
			if err := c.cluster.Restart(ctx, st.node); err != nil {
				return err
			}
		}
		return c.cluster.Failback(ctx, st.node)
	case Leave:
		return c.cluster.Leave(ctx, st.node)
	case Stall:
		return c.stall(ctx, st.node)
	case LostHost:
		return c.loseHost(ctx, st.node)
	}
	return fmt.Errorf("unknown churn kind %q", st.kind)
}

// stall stands node id still for StallFor, waits it out, and waits for the cluster to
// settle again (the node comes back as a replica of what it owned).
func (c *churner) stall(ctx context.Context, id int32) error {
	c.loss = loss{owned: ownedBy(c.cluster.Map(), id)}
	start := time.Now()
	if err := c.cluster.Stall(id, StallFor); err != nil {
		return err
	}
	t := time.NewTimer(StallFor)
	defer t.Stop()
	if err := c.watch(ctx, id, start, t.C, nil); err != nil {
		return err
	}
	return c.cluster.WaitSettled(ctx)
}

// loseHost stands node id still, as a host that is lost for good (no reset: its
// connections stay open, its requests unread), until the store has failed it over and
// LostHostHold more; then it replaces the host: the stalled node is stopped, never having
// answered a request it held, and started again on its old ports, empty, and the demo
// waits for the cluster to settle (the new process catches up as a replica). The node is
// noted as killed, so that a later failback hands its segments back.
func (c *churner) loseHost(ctx context.Context, id int32) error {
	c.loss = loss{owned: ownedBy(c.cluster.Map(), id)}
	start := time.Now()
	if err := c.cluster.Stall(id, lostHostMax); err != nil {
		return err
	}
	c.killed = append(c.killed, id)
	hold := make(chan time.Time)
	var held *time.Timer
	err := c.watch(ctx, id, start, hold, func() {
		held = time.AfterFunc(LostHostHold, func() { close(hold) })
	})
	if held != nil {
		held.Stop()
	}
	c.loss.lostFor = time.Since(start)
	// The host is replaced even when the watch failed, so that the rest of the schedule
	// finds a cluster that works.
	if kerr := c.cluster.Kill(id); kerr != nil {
		return errors.Join(err, kerr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if rerr := c.cluster.Restart(rctx, id); rerr != nil {
		return errors.Join(err, fmt.Errorf("replacing n%d: %w", id, rerr))
	}
	if err != nil {
		return err
	}
	return c.cluster.WaitSettled(ctx)
}

// watch follows the map every 10 ms from start, while node id stands still, until done
// fires or ctx ends; failedOver, if set, is called once when the node owns no segment.
func (c *churner) watch(ctx context.Context, id int32, start time.Time, done <-chan time.Time, failedOver func()) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			seen := c.loss.failover != 0
			c.loss.look(c.cluster.Map(), id, time.Since(start))
			if !seen && c.loss.failover != 0 && failedOver != nil {
				failedOver()
			}
		case <-ctx.Done():
			if c.loss.failover == 0 {
				return fmt.Errorf("the store did not fail n%d over in %s: %w", id, time.Since(start).Round(time.Millisecond), ctx.Err())
			}
			return ctx.Err()
		}
	}
}

// ownedBy returns the segments map m gives node id.
func ownedBy(m *zaris.ClusterMap, id int32) []int32 {
	var segs []int32
	for _, s := range m.Segments {
		if s.IsSetOwner() && s.GetOwner() == id {
			segs = append(segs, s.ID)
		}
	}
	return segs
}

// ownerTarget is the node a stall or a lost host stops: the highest running node the
// cluster started with that owns a segment (a node failed over earlier owns none, and
// stopping it would show nothing), or else the highest running node that owns one, or
// else killTarget.
func (c *churner) ownerTarget() int32 {
	m := c.cluster.Map()
	running := c.cluster.Nodes()
	for _, ids := range [][]int32{c.initial, running} {
		for _, id := range slices.Backward(ids) {
			if slices.Contains(running, id) && len(ownedBy(m, id)) > 0 {
				return id
			}
		}
	}
	return c.killTarget()
}

// killTarget is the highest running node the cluster started with (its preferred segments
// can fail back later), or else the highest running node.
func (c *churner) killTarget() int32 {
	running := c.cluster.Nodes()
	for _, id := range slices.Backward(c.initial) {
		if slices.Contains(running, id) {
			return id
		}
	}
	return running[len(running)-1]
}

// leaveTarget is the node that joined last, if it still runs, or else the highest running node.
func (c *churner) leaveTarget() int32 {
	running := c.cluster.Nodes()
	for _, id := range slices.Backward(c.joined) {
		if slices.Contains(running, id) {
			return id
		}
	}
	return running[len(running)-1]
}

// migrationTarget picks segment 0 and a running node that does not own it (to, if given).
func (c *churner) migrationTarget(to int32) (seg, target int32, err error) {
	m := c.cluster.Map()
	owner := int32(-1)
	for _, s := range m.Segments {
		if s.ID == seg && s.IsSetOwner() {
			owner = s.GetOwner()
		}
	}
	if to != 0 {
		return seg, to, nil
	}
	for _, id := range c.cluster.Nodes() {
		if id != owner {
			return seg, id, nil
		}
	}
	return seg, 0, fmt.Errorf("no running node other than n%d to migrate segment %d to", owner, seg)
}
