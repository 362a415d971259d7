package store

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// Stall makes node id stand still for d, as a stopped process (SIGSTOP, a long GC pause, a
// VM migration) would: it reads no request on its data and peer ports (connections stay
// open, requests wait in them), answers no ping, and renews no lease, so a stall longer
// than the lease TTL has it failed over. When d is over, the node takes up the requests
// that waited; its right to serve ran out with its lease, so it answers none of them from
// a stale copy. Stall returns at once; it reports an error if the node is not running.
func (c *Cluster) Stall(id int32, d time.Duration) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("store: node %d is not running", id)
	}
	n.Stall(d)
	return nil
}

// Stall makes the node stand still for d (see Cluster.Stall). A stall given while one
// runs ends with the later of the two.
func (n *Node) Stall(d time.Duration) {
	until := time.Now().Add(d)
	if reg := n.reg.Load(); reg != nil {
		reg.Stall(d)
	}
	n.stallMu.Lock()
	defer n.stallMu.Unlock()
	if n.stalled != nil && !until.After(n.stallUntil) {
		return
	}
	if n.stalled == nil {
		n.stalled = make(chan struct{})
	}
	n.stallUntil = until
	ch := n.stalled
	time.AfterFunc(d, func() {
		n.stallMu.Lock()
		defer n.stallMu.Unlock()
		if n.stalled == ch && !time.Now().Before(n.stallUntil) {
			close(ch)
			n.stalled = nil
		}
	})
}

// awaitStall waits out a stall, if one runs, or the node's end.
func (n *Node) awaitStall() {
	n.stallMu.Lock()
	ch := n.stalled
	n.stallMu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-n.ctx.Done():
		}
	}
}

// stallable is a processor that reads no request while its node is stalled.
type stallable struct {
	thrift.TProcessor
	n *Node
}

func (s stallable) Process(ctx context.Context, in, out thrift.TProtocol) (bool, thrift.TException) {
	s.n.awaitStall()
	return s.TProcessor.Process(ctx, in, out)
}
