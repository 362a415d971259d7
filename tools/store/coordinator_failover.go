package store

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// monitor is a node's heartbeat loop: every Heartbeat it pings the node, or pushes the map
// when the node is behind. After a failed call it decides, in this order: a node that
// answered as another process (it restarted) or whose data port refuses a connection (the
// process is gone) is failed over at once; a node silent for less than FailureTimeout is
// left alone; a node silent for longer is suspected and probed (probeNode), and failed over
// only if the probe goes unanswered, once its etcd lease is revoked and the lease's TTL ran
// out (revokeNodeLease). A live node that is merely slow (a loaded machine, a GC pause)
// answers the probe and keeps its segments: failing it over would leave the segments whose
// other copy is still a learner without owner. A node whose etcd lease expires is failed
// over by watchNodes.
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
				e, err := zarispeer.NewZarisPeerClient(cl).PushMap(ctx, m, 0)
				known = e
				return err
			})
		} else {
			err = c.pool.call(rec.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				e, err := ping(ctx, cl, rec, m)
				known = e
				return err
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
		fail := errors.Is(err, errIncarnation) || refused(c.cfg.dial, rec.dataAddr(), min(c.cfg.FailureTimeout/2, time.Second))
		if !fail && time.Since(lastOK) > c.cfg.FailureTimeout {
			// Suspected: silent past the failure timeout although its port accepts.
			e, perr := c.probeNode(ctx, rec)
			if ctx.Err() != nil {
				return
			}
			if perr == nil {
				lastOK = time.Now()
				known = e
				c.slowKept.Add(1)
				c.cfg.Logger.Warn("slow node answered the probe; kept", "node", rec.info.ID, "err", err)
				continue
			}
			// The node may be alive, only cut off: it must stop serving before another node
			// takes its segments over, so end its etcd lease and wait its TTL out. The node
			// learns of the loss at its next renewal and registers again.
			if !c.giveUp(ctx, rec, perr.Error()) {
				if ctx.Err() != nil {
					return
				}
				continue
			}
			return
		}
		if fail {
			c.mu.Lock()
			if c.nodes[rec.info.ID] == rec && rec.alive {
				c.failLocked(rec, err.Error())
			}
			c.mu.Unlock()
			return
		}
	}
}

// giveUp fails over rec, a node that may be alive, once it can no longer serve: it revokes
// the node's etcd lease and waits the TTL out (revokeNodeLease). It reports false if the
// lease could not be revoked or ctx ended. The node learns of the loss at its next renewal
// and registers again.
func (c *Coordinator) giveUp(ctx context.Context, rec *nodeRec, why string) bool {
	if !c.revokeNodeLease(ctx, rec) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[rec.info.ID] == rec && rec.alive {
		c.failLocked(rec, why)
	}
	return true
}

// giveUpLocked starts giving rec up (giveUp) in the background, unless that is under way.
// Callers hold c.mu.
func (c *Coordinator) giveUpLocked(rec *nodeRec, why string) {
	if rec.revoking {
		return
	}
	rec.revoking = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.giveUp(c.ctx, rec, why)
	}()
}

// ping sends the heartbeat and returns the epoch the node holds; a node that answers as
// another process than rec yields errIncarnation.
func ping(ctx context.Context, cl thrift.TClient, rec *nodeRec, m *zarispeer.PeerMap) (int64, error) {
	resp, err := zarispeer.NewZarisPeerClient(cl).Ping(ctx, m.Epoch, m.ClusterId, 0)
	if err != nil {
		return -1, err
	}
	if resp.Incarnation != rec.incarnation {
		return -1, errIncarnation
	}
	return resp.Epoch, nil
}

// probeNode pings a suspected node on a connection of its own (a pooled one may be the one
// that hung) and waits up to ProbeTimeout for the answer. It returns the node's epoch, or
// why the node counts as dead.
func (c *Coordinator) probeNode(ctx context.Context, rec *nodeRec) (int64, error) {
	c.mu.Lock()
	m := c.m
	c.mu.Unlock()
	cfg := &thrift.TConfiguration{
		ConnectTimeout:    c.cfg.ProbeTimeout,
		SocketTimeout:     c.cfg.ProbeTimeout,
		MaxMessageSize:    peerMaxMessage,
		MaxFrameSize:      peerMaxMessage,
		TBinaryStrictRead: thrift.BoolPtr(true),
	}
	sock := newSocket(rec.info.PeerAddr, c.cfg.Credentials.clientTLS(), cfg)
	if err := sock.Open(); err != nil {
		return -1, err
	}
	defer sock.Close()
	stop := context.AfterFunc(ctx, func() { sock.Close() })
	defer stop()
	proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(thrift.NewTBufferedTransport(sock, 512), cfg), cfg)
	return ping(ctx, thrift.NewTStandardClient(proto, proto), rec, m)
}

// sleepCtx sleeps for d (nothing if d <= 0) and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// refused reports whether addr, dialled with dial, refused a connection: nothing listens
// there, so the node's process is gone. A dial that times out or fails otherwise proves
// nothing (a partition between the coordinator and the node, a full accept queue): the node
// may be alive and serving its clients, so it is only suspected.
func refused(dial func(network, addr string, timeout time.Duration) (net.Conn, error), addr string, timeout time.Duration) bool {
	conn, err := dial("tcp", addr, timeout)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	conn.Close()
	return false
}

// failLocked fails a node over: every segment it owned goes to a replica (the preferred
// primary or the pending handoff target when it is one), it leaves every segment, and the new
// map goes out at once. Callers hold c.mu.
func (c *Coordinator) failLocked(rec *nodeRec, why string) {
	id := rec.info.ID
	rec.alive = false
	n, _ := c.failovers.LoadOrStore(id, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
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
		if next == noOwner {
			next = c.syncedLearnerLocked(sg, id)
		}
		setOwner(sg, next)
		sg.Replicas, sg.Learners = remove(sg.Replicas, next), remove(sg.Learners, next)
		delete(c.synced, syncKey{int32(s), next})
		delete(c.learnerAt, syncKey{int32(s), next})
		sg.Cutover, sg.Transitioning = false, false
		if next == noOwner {
			// No copy is left. If this very process comes back (it was failed over while
			// alive), its data is intact and it takes the segment back.
			c.lastOwner[s] = ownerRef{id: id, incarnation: rec.incarnation}
		} else {
			c.newTenureLocked(sg)
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

// syncedLearnerLocked returns a live learner of sg that reported a full copy fetched from
// owner (the coordinator has not made it a replica yet), or noOwner. Such a copy is as good
// as a replica's: the owner sent it every write it acknowledged after the copy. Callers hold
// c.mu.
func (c *Coordinator) syncedLearnerLocked(sg *zarispeer.PeerSegment, owner int32) int32 {
	for _, l := range sg.Learners {
		if from, ok := c.synced[syncKey{sg.ID, l}]; ok && from == owner && c.liveLocked(l) {
			return l
		}
	}
	return noOwner
}

func firstOr(list []int32, def int32) int32 {
	if len(list) == 0 {
		return def
	}
	return list[0]
}
