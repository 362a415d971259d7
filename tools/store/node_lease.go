package store

import (
	"time"
)

// awaitLease is called for a request that found the node's right to serve run out while
// routing it with v. It waits up to LeaseWait for the next renewal of the node's etcd lease
// and reports whether the request may be served: the right runs again and v is still the
// node's map. A stall of the whole process (a loaded machine, a long pause) lets the right
// run out although etcd kept the lease; the renewal goes out as soon as the stall ends, so a
// request that arrives first waits for it instead of answering Unavailable. A node whose
// lease is gone gets no renewal and still answers Unavailable, LeaseWait later.
func (n *Node) awaitLease(v *view) bool {
	timer := time.NewTimer(n.cfg.LeaseWait)
	defer timer.Stop()
	n.leaseWaiters.Add(1)
	defer n.leaseWaiters.Add(-1)
	for {
		renewed := n.live.Renewals()
		if n.leased() {
			return n.current.Load() == v
		}
		select {
		case <-renewed:
		case <-timer.C:
			return n.leased() && n.current.Load() == v
		case <-n.ctx.Done():
			return false
		}
	}
}
