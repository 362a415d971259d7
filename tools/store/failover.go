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
// when the node is behind. After a failed call it decides, in this order: a node that
// answered as another process (it restarted) or whose data port refuses a connection (the
// process is gone) is failed over at once; a node silent for less than FailureTimeout is
// left alone; a node silent for longer is suspected and probed (probeNode), and failed over
// only if the probe goes unanswered. A live node that is merely slow (a loaded machine, a GC
// pause) answers the probe and keeps its segments: failing it over would leave the segments
// whose other copy is still a learner without owner.
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
		lease := c.grantLocked(rec)
		c.mu.Unlock()
		var err error
		if known < m.Epoch {
			err = c.pool.call(rec.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				e, err := zarispeer.NewZarisPeerClient(cl).PushMap(ctx, m, lease)
				known = e
				return err
			})
		} else {
			err = c.pool.call(rec.info.PeerAddr, c.cfg.FailureTimeout, func(cl thrift.TClient) error {
				e, err := ping(ctx, cl, rec, m, lease)
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
		fail := errors.Is(err, errIncarnation) || !probe(rec.dataAddr(), min(c.cfg.FailureTimeout/2, time.Second))
		if !fail && time.Since(lastOK) > c.cfg.FailureTimeout {
			// Suspected: silent past the failure timeout although its port accepts.
			e, perr := c.probeNode(ctx, rec, true)
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
			// takes its segments over, so wait out the last lease it was granted.
			if !sleepCtx(ctx, c.leaseLeft(rec)+time.Millisecond) {
				return
			}
			c.mu.Lock()
			failed := c.nodes[rec.info.ID] == rec && rec.alive
			if failed {
				c.failLocked(rec, perr.Error())
			}
			c.mu.Unlock()
			if failed {
				c.wg.Add(1)
				go c.readmitWhenItAnswers(rec)
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

// readmitWhenItAnswers watches a node that was failed over while its port still accepted
// (it may be alive but starved, or stopped): every heartbeat it probes it, and as soon as the
// same process answers, admits it again as if it had registered. A segment whose only copy
// it holds is then given back at once instead of after the node's RejoinAfter. The watch
// ends when the node answers, registers by itself, turns out dead or restarted, or the
// coordinator closes.
func (c *Coordinator) readmitWhenItAnswers(rec *nodeRec) {
	defer c.wg.Done()
	id := rec.info.ID
	for sleepCtx(c.ctx, c.cfg.Heartbeat) {
		c.mu.Lock()
		current := c.nodes[id] == rec
		c.mu.Unlock()
		if !current || !probe(rec.dataAddr(), min(c.cfg.FailureTimeout/2, time.Second)) {
			return
		}
		_, err := c.probeNode(c.ctx, rec, false)
		if errors.Is(err, errIncarnation) {
			return
		}
		if err != nil {
			continue
		}
		c.mu.Lock()
		current = c.nodes[id] == rec && !rec.alive
		c.mu.Unlock()
		if !current {
			return
		}
		c.cfg.Logger.Info("node failed over while alive answers again; admitting it", "node", id)
		_, err = c.register(&zarispeer.RegisterRequest{
			NodeId: id, Incarnation: rec.incarnation, Host: rec.info.Host, Port: rec.info.Port, PeerAddr: rec.info.PeerAddr,
		})
		if err != nil {
			c.cfg.Logger.Warn("admitting the node again failed", "node", id, "err", err)
		}
		return
	}
}

// ping sends the heartbeat and returns the epoch the node holds; a node that answers as
// another process than rec yields errIncarnation.
func ping(ctx context.Context, cl thrift.TClient, rec *nodeRec, m *zarispeer.PeerMap, lease int64) (int64, error) {
	resp, err := zarispeer.NewZarisPeerClient(cl).Ping(ctx, m.Epoch, m.ClusterId, lease)
	if err != nil {
		return -1, err
	}
	if resp.Incarnation != rec.incarnation {
		return -1, errIncarnation
	}
	return resp.Epoch, nil
}

// grantLocked extends the lease of rec by FailureTimeout + ProbeTimeout from now and returns
// its end (unix nanoseconds). Callers hold c.mu and send it with the map they read under the
// same hold.
func (c *Coordinator) grantLocked(rec *nodeRec) int64 {
	rec.granted = max(rec.granted, time.Now().Add(c.cfg.FailureTimeout+c.cfg.ProbeTimeout).UnixNano())
	return rec.granted
}

// leaseLeft returns how long the latest lease granted to rec still runs (<= 0: ran out).
func (c *Coordinator) leaseLeft(rec *nodeRec) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Until(time.Unix(0, rec.granted))
}

// probeNode pings a suspected node on a connection of its own (a pooled one may be the one
// that hung) and waits up to ProbeTimeout for the answer; withLease extends its lease. It
// returns the node's epoch, or why the node counts as dead.
func (c *Coordinator) probeNode(ctx context.Context, rec *nodeRec, withLease bool) (int64, error) {
	c.mu.Lock()
	m := c.m
	var lease int64
	if withLease {
		lease = c.grantLocked(rec)
	}
	c.mu.Unlock()
	cfg := &thrift.TConfiguration{
		ConnectTimeout:    c.cfg.ProbeTimeout,
		SocketTimeout:     c.cfg.ProbeTimeout,
		MaxMessageSize:    peerMaxMessage,
		MaxFrameSize:      peerMaxMessage,
		TBinaryStrictRead: thrift.BoolPtr(true),
	}
	sock := thrift.NewTSocketConf(rec.info.PeerAddr, cfg)
	if err := sock.Open(); err != nil {
		return -1, err
	}
	defer sock.Close()
	stop := context.AfterFunc(ctx, func() { sock.Close() })
	defer stop()
	proto := thrift.NewTBinaryProtocolConf(thrift.NewTFramedTransportConf(thrift.NewTBufferedTransport(sock, 512), cfg), cfg)
	return ping(ctx, thrift.NewTStandardClient(proto, proto), rec, m, lease)
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
