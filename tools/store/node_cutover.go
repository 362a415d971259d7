package store

import "time"

// awaitHandoff is called for a request that found segment s in cut-over in v, and returns
// the view to route it with. A cut-over lasts while the coordinator fences a handoff (the
// old owner installs the revoking map, then the map naming the new owner goes out), a map
// push or two. So the request waits up to CutoverWait for a map that ends the cut-over and
// is then answered from it, served by this node or sent on with Moved at the new epoch,
// instead of answering Migrating or Unavailable and sending the client into a backoff. It
// returns the node's current view when the wait ends, v itself when s is not in cut-over.
func (n *Node) awaitHandoff(v *view, s int32) *view {
	if v == nil || !v.segs[s].cutover {
		return v
	}
	timer := time.NewTimer(n.cfg.CutoverWait)
	defer timer.Stop()
	n.cutoverWaiters.Add(1)
	defer n.cutoverWaiters.Add(-1)
	for {
		changed := n.changedCh()
		cur := n.current.Load()
		if !cur.segs[s].cutover {
			return cur
		}
		select {
		case <-changed:
		case <-timer.C:
			return n.current.Load()
		case <-n.ctx.Done():
			return n.current.Load()
		}
	}
}
