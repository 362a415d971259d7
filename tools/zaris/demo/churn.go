package demo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/clustron/zaris-go/tools/store"
)

// churner carries out scheduled events against the store and remembers what it did, so
// that a failback targets the node that was killed and a leave the node that joined.
type churner struct {
	cluster *store.Cluster
	initial []int32 // the nodes the cluster started with
	killed  []int32
	joined  []int32
	// failover is how long after the last stall began the store had given away every
	// segment of the stalled node; 0 if it had not by the stall's end.
	failover time.Duration
}

// do carries out e and returns a label for it, such as "kill n3".
func (c *churner) do(ctx context.Context, e Event) (string, error) {
	switch e.Kind {
	case Migrate:
		seg, to, err := c.migrationTarget(e.Node)
		if err != nil {
			return "migrate", err
		}
		return fmt.Sprintf("migrate seg %d → n%d", seg, to), c.cluster.MigrateSegment(ctx, seg, to)
	case Join:
		id, err := c.cluster.Join(ctx)
		if err == nil {
			c.joined = append(c.joined, id)
		}
		return fmt.Sprintf("join n%d", id), err
	case Kill:
		id := e.Node
		if id == 0 {
			id = c.killTarget()
		}
		c.killed = append(c.killed, id)
		return fmt.Sprintf("kill n%d", id), c.cluster.Kill(id)
	case Failback:
		id := e.Node
		if id == 0 {
			if len(c.killed) == 0 {
				return "failback", fmt.Errorf("no node was killed before this failback")
			}
			id = c.killed[len(c.killed)-1]
		}
		label := fmt.Sprintf("failback n%d", id)
		if c.cluster.Node(id) == nil {
			if err := c.cluster.Restart(ctx, id); err != nil {
				return label, err
			}
		}
		return label, c.cluster.Failback(ctx, id)
	case Leave:
		id := e.Node
		if id == 0 {
			id = c.leaveTarget()
		}
		return fmt.Sprintf("leave n%d", id), c.cluster.Leave(ctx, id)
	case Stall:
		id := e.Node
		if id == 0 {
			id = c.killTarget()
		}
		return fmt.Sprintf("stall n%d %s", id, StallFor), c.stall(ctx, id)
	}
	return string(e.Kind), fmt.Errorf("unknown churn kind %q", e.Kind)
}

// stall stands node id still for StallFor, waits it out, and waits for the cluster to
// settle again (the node comes back as a replica of what it owned).
func (c *churner) stall(ctx context.Context, id int32) error {
	start := time.Now()
	if err := c.cluster.Stall(id, StallFor); err != nil {
		return err
	}
	c.failover = 0
	t := time.NewTimer(StallFor)
	defer t.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-t.C:
			done = true
		case <-tick.C:
			if c.failover == 0 && !owns(c.cluster, id) {
				c.failover = time.Since(start)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.cluster.WaitSettled(ctx)
}

// owns reports whether the cluster's map gives node id any segment.
func owns(c *store.Cluster, id int32) bool {
	for _, s := range c.Map().Segments {
		if s.IsSetOwner() && s.GetOwner() == id {
			return true
		}
	}
	return false
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
