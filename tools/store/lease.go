package store

import (
	"time"
)

// leaseRenewedCh returns the channel closed by the next lease extension. Take it before
// checking the lease so no extension is missed.
func (n *Node) leaseRenewedCh() <-chan struct{} {
	for {
		if p := n.leaseRenewed.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		n.leaseRenewed.CompareAndSwap(nil, &ch)
	}
}

// noteLeaseRenewed wakes the requests waiting in awaitLease. Callers hold leaseMu.
func (n *Node) noteLeaseRenewed() {
	ch := make(chan struct{})
	if old := n.leaseRenewed.Swap(&ch); old != nil {
		close(*old)
	}
}

// awaitLease is called for a request that found the node's lease run out while routing it
// with v. It waits up to LeaseWait for the coordinator's next heartbeat to extend the lease
// and reports whether the request may be served: the lease runs again and v is still the
// node's map. A stall of the whole process (a loaded machine, a long pause) lets the lease
// run out even though the coordinator, stalled too, never gave up on the node; its heartbeat
// comes as soon as the stall ends, so a request that arrives first waits for it instead of
// answering Unavailable. A node the coordinator did give up on gets no heartbeat and still
// answers Unavailable, LeaseWait later.
func (n *Node) awaitLease(v *view) bool {
	timer := time.NewTimer(n.cfg.LeaseWait)
	defer timer.Stop()
	n.leaseWaiters.Add(1)
	defer n.leaseWaiters.Add(-1)
	for {
		renewed := n.leaseRenewedCh()
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
