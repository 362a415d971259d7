package store

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/gen/zarispeer"
)

// kvHandler serves the ZarisKv service of a node.
type kvHandler struct {
	// An operation the IDL declares and the node does not serve yet is answered with an
	// application exception naming it, which the client classifies fatal.
	zarisserver.UnimplementedZarisKv
	n *Node
}

var _ zaris.ZarisKv = (*kvHandler)(nil)

// validKey reports whether key is non-empty and within MaxKeySize.
func (n *Node) validKey(key []byte) bool { return len(key) > 0 && len(key) <= n.cfg.MaxKeySize }

// route is v.route for this node, except that an owner whose lease ran out answers
// Unavailable unless the lease is extended within LeaseWait (awaitLease): the coordinator
// may have given its segments to another node.
func (n *Node) route(v *view, s int32, write bool) zaris.KvStatus {
	st := v.route(s, n.cfg.ID, write)
	if st == zaris.KvStatus_Ok && !n.leased() && !n.awaitLease(v) {
		return zaris.KvStatus_Unavailable
	}
	return st
}

// Get reads a key at its owner.
func (h *kvHandler) Get(_ context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	if req == nil {
		req = &zaris.GetRequest{} // a call without its request: nothing is valid
	}
	r := h.n.read(req.GetKey())
	return &zaris.GetResponse{Status: r.status, Value: r.value, Version: r.version, MapEpoch: r.epoch}, nil
}

// readResult is the answer to one read: what Get answers, without the response around it.
type readResult struct {
	status  zaris.KvStatus
	value   []byte // nil unless status is Ok
	version int64
	epoch   int64
}

// read answers one read of key at this node under its current map, as Get does.
func (n *Node) read(key []byte) readResult {
	v := n.current.Load()
	r := readResult{epoch: n.Epoch()}
	if !n.validKey(key) {
		r.status = zaris.KvStatus_InvalidRequest
		return r
	}
	if v == nil {
		r.status = zaris.KvStatus_Unavailable
		return r
	}
	s := clustermap.SegmentOf(key, v.segCount)
	v = n.awaitHandoff(v, s)
	r.epoch = v.epoch
	if r.status = n.route(v, s, false); r.status != zaris.KvStatus_Ok {
		return r
	}
	seg := n.segments()[s]
	seg.mu.Lock()
	e, ok := seg.lookup(key)
	seg.mu.Unlock()
	if !ok {
		r.status = zaris.KvStatus_NotFound
		return r
	}
	r.value, r.version = e.value, e.version
	if r.value == nil {
		r.value = []byte{}
	}
	return r
}

// change is what a write op decides given the key's current entry: a new value, a delete,
// or an answer (status other than Ok) without writing.
type change struct {
	status  zaris.KvStatus
	version int64 // the version to answer with when status is not Ok
	value   []byte
	del     bool
	result  int64 // the operation's result value, kept as a tokened write's outcome
}

// writeResult is the outcome of a write.
type writeResult struct {
	status  zaris.KvStatus
	version int64 // the new version (Ok) or the version decide answered with
	prev    entry // the entry before the write
	epoch   int64
	// replayed is set when the request's token was seen before: the first outcome, which
	// the handler answers with; nothing was written.
	replayed *outcomeRec
	// inDoubt: the write failed but some copy may have applied it. The handler then
	// answers nothing (thrift.ErrAbandonRequest closes the connection): a status would tell
	// the client it was not applied.
	inDoubt bool
}

// errInDoubt is what a handler returns for an in-doubt write: the connection closes
// without an answer.
var errInDoubt = thrift.ErrAbandonRequest

// write runs one write op at the segment's owner: route by the node's map, decide from the
// current entry, replicate, then apply locally and acknowledge. A write with a request
// token (tok, nil for none) whose outcome the segment keeps is answered with that outcome
// and writes nothing; otherwise its outcome travels with the write, to every copy before
// the acknowledgement (rule B8).
//
// Once the write may have reached a copy, the owner sees it through whatever the caller
// does: it resends it until every copy applied it (then applies it itself) or its map no
// longer makes it the owner, holding the segment's write lock, so no later write and no
// cut-over's confirmation (confirmedEpoch) comes before it. The caller waits at most
// ReplicationTimeout, or until ctx ends, and is then answered in doubt: so the copies never
// disagree on a write, whatever the client was told.
func (n *Node) write(ctx context.Context, key []byte, tok *zaris.RequestToken, decide func(cur entry, exists bool) change) writeResult {
	v := n.current.Load()
	if v == nil {
		return writeResult{status: zaris.KvStatus_Unavailable}
	}
	s := clustermap.SegmentOf(key, v.segCount)
	n.awaitHandoff(v, s) // before the segment's write lock, which a handoff's copy may need
	seg := n.segments()[s]
	timer := time.NewTimer(n.cfg.ReplicationTimeout) // the caller's wait, the lock's included
	defer timer.Stop()
	if !seg.writeMu.lockUnless(timer.C, ctx.Done()) {
		// An earlier write is still being seen through: nothing was written.
		return writeResult{status: zaris.KvStatus_Unavailable, epoch: n.Epoch()}
	}
	locked := true
	defer func() {
		if locked {
			seg.writeMu.Unlock()
		}
	}()
	v = n.current.Load()
	if st := n.route(v, s, true); st != zaris.KvStatus_Ok {
		return writeResult{status: st, epoch: v.epoch}
	}
	seg.mu.Lock()
	if first, ok := n.firstOutcome(seg, tok); ok {
		seg.mu.Unlock()
		return writeResult{status: zaris.KvStatus_Ok, version: first.version, replayed: &first, epoch: v.epoch}
	}
	cur, exists := seg.lookup(key)
	version := max(seg.counter+1, n.versionFloor.Load())
	seg.mu.Unlock()
	c := decide(cur, exists)
	if c.status != zaris.KvStatus_Ok {
		return writeResult{status: c.status, version: c.version, prev: cur, epoch: v.epoch}
	}
	e := &zarispeer.Entry{Key: key, Value: c.value, Version: version, Deleted: c.del}
	if c.del {
		e.Value = nil
	} else if e.Value == nil {
		e.Value = []byte{}
	}
	if tok != nil && !n.cfg.DisableDedup {
		e.Outcome = &zarispeer.Outcome{Client: tok.Client, Sequence: tok.Sequence, Version: version, Value: c.result}
	}

	// confirmedEpoch holds a cut-over back from here on; a cut-over map installed since the
	// route was confirmed without waiting for this write, which must then reach no copy.
	seg.writing.Store(v.epoch)
	if now := n.current.Load(); now != v {
		if st := now.route(s, n.cfg.ID, true); st != zaris.KvStatus_Ok {
			seg.writing.Store(0)
			return writeResult{status: st, epoch: now.epoch}
		}
	}
	p := new(pendingWrite)
	p.idle.L = &p.mu
	done := make(chan writeResult, 1)
	locked = false
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer seg.writeMu.Unlock()
		defer seg.writing.Store(0)
		v, st, inDoubt := n.replicate(s, seg, e, p)
		if st == zaris.KvStatus_Ok && !p.commit() {
			st = zaris.KvStatus_Unavailable // no copy was sent the write, and its caller left
		}
		seg.mu.Lock()
		defer seg.mu.Unlock()
		switch {
		case st == zaris.KvStatus_Ok:
			seg.apply(e)
			n.remember(seg, e.Outcome)
			// Every copy applied this write and all before it: its version is stable.
			seg.collect(version)
			done <- writeResult{status: st, version: version, prev: cur, epoch: v.epoch}
		case inDoubt:
			// Some copy may hold this version: it is never handed out again.
			seg.counter = max(seg.counter, version)
			done <- writeResult{status: st, epoch: v.epoch, inDoubt: true}
		default:
			done <- writeResult{status: st, epoch: v.epoch}
		}
	}()
	select {
	case r := <-done:
		return r
	case <-timer.C:
	case <-ctx.Done():
	}
	if p.abandon() {
		return writeResult{status: zaris.KvStatus_Unavailable, epoch: n.Epoch()}
	}
	return writeResult{status: zaris.KvStatus_Unavailable, epoch: n.Epoch(), inDoubt: true}
}

// pendingWrite is what a write's caller and the owner's replication of it share: whether
// the write may have reached a copy, and whether the caller gave up on a write that had not.
type pendingWrite struct {
	mu        sync.Mutex
	idle      sync.Cond // signalled when a send ends; its L is &mu
	sending   int       // sends in flight
	reached   bool      // some copy may have applied the write
	abandoned bool      // the caller was answered that nothing was written: send nothing more
}

// send reports whether the replication may send n more copies of the write, and counts them.
func (p *pendingWrite) send(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.abandoned {
		return false
	}
	p.sending += n
	return true
}

// sent records the end of one send; reached says whether the copy may have applied it.
func (p *pendingWrite) sent(reached bool) {
	p.mu.Lock()
	p.sending--
	p.reached = p.reached || reached
	p.mu.Unlock()
	p.idle.Broadcast()
}

// commit reports whether the owner may apply the write, every copy having applied it: not
// if the caller was told nothing was written. Otherwise the write counts as reached.
func (p *pendingWrite) commit() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reached = p.reached || !p.abandoned
	return !p.abandoned
}

// abandon waits for the sends in flight (each ends within peerCallTimeout), then stops the
// replication if the write has certainly reached no copy, and reports whether it did: the
// caller may then be told that nothing was written.
func (p *pendingWrite) abandon() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.sending > 0 && !p.reached {
		p.idle.Wait()
	}
	if !p.reached {
		p.abandoned = true
	}
	return p.abandoned
}

// Put writes a key at its owner, guarded by ifMatchVersion or ifAbsent when set.
func (h *kvHandler) Put(ctx context.Context, req *zaris.PutRequest) (*zaris.PutResponse, error) {
	if req == nil {
		req = &zaris.PutRequest{} // a call without its request: nothing is valid
	}
	n := h.n
	if !n.validKey(req.GetKey()) || len(req.GetValue()) > n.cfg.MaxValueSize {
		return &zaris.PutResponse{Status: zaris.KvStatus_InvalidRequest, MapEpoch: n.Epoch()}, nil
	}
	r := n.write(ctx, req.Key, nil, func(cur entry, exists bool) change {
		if req.IsSetIfAbsent() && req.GetIfAbsent() && exists {
			return change{status: zaris.KvStatus_Conflict, version: cur.version}
		}
		if req.IsSetIfMatchVersion() && (!exists || cur.version != req.GetIfMatchVersion()) {
			return change{status: zaris.KvStatus_Conflict, version: cur.version}
		}
		return change{value: req.Value}
	})
	if r.inDoubt {
		return nil, errInDoubt
	}
	return &zaris.PutResponse{Status: r.status, Version: r.version, MapEpoch: r.epoch}, nil
}

// Delete removes a key at its owner, guarded by ifMatchVersion when set.
func (h *kvHandler) Delete(ctx context.Context, req *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	if req == nil {
		req = &zaris.DeleteRequest{} // a call without its request: nothing is valid
	}
	n := h.n
	if !n.validKey(req.GetKey()) {
		return &zaris.DeleteResponse{Status: zaris.KvStatus_InvalidRequest, MapEpoch: n.Epoch()}, nil
	}
	r := n.write(ctx, req.Key, nil, func(cur entry, exists bool) change {
		if !exists {
			return change{status: zaris.KvStatus_NotFound}
		}
		if req.IsSetIfMatchVersion() && cur.version != req.GetIfMatchVersion() {
			return change{status: zaris.KvStatus_Conflict, version: cur.version}
		}
		return change{del: true}
	})
	if r.inDoubt {
		return nil, errInDoubt
	}
	resp := &zaris.DeleteResponse{Status: r.status, Version: r.version, MapEpoch: r.epoch}
	if r.status == zaris.KvStatus_Ok {
		resp.Version = r.prev.version
	}
	return resp, nil
}

// Increment adds delta to a key's decimal value (a missing key counts as 0). A value that is
// not a decimal int64, or a sum that overflows, answers InvalidRequest. A request whose
// token the segment has seen is answered with the first outcome, the value and version
// that increment made (rule B8).
func (h *kvHandler) Increment(ctx context.Context, req *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	if req == nil {
		req = &zaris.IncrementRequest{} // a call without its request: nothing is valid
	}
	n := h.n
	if !n.validKey(req.GetKey()) {
		return &zaris.IncrementResponse{Status: zaris.KvStatus_InvalidRequest, MapEpoch: n.Epoch()}, nil
	}
	var sum int64
	r := n.write(ctx, req.Key, req.Token, func(cur entry, exists bool) change {
		var old int64
		if exists {
			var err error
			if old, err = strconv.ParseInt(string(cur.value), 10, 64); err != nil {
				return change{status: zaris.KvStatus_InvalidRequest}
			}
		}
		d := req.Delta
		if (d > 0 && old > math.MaxInt64-d) || (d < 0 && old < math.MinInt64-d) {
			return change{status: zaris.KvStatus_InvalidRequest}
		}
		sum = old + d
		return change{value: []byte(strconv.FormatInt(sum, 10)), result: sum}
	})
	if r.inDoubt {
		return nil, errInDoubt
	}
	if r.replayed != nil {
		return &zaris.IncrementResponse{Status: zaris.KvStatus_Ok, Value: r.replayed.value, Version: r.replayed.version, MapEpoch: r.epoch}, nil
	}
	resp := &zaris.IncrementResponse{Status: r.status, Version: r.version, MapEpoch: r.epoch}
	if r.status == zaris.KvStatus_Ok {
		resp.Value = sum
	} else {
		resp.Version = 0
	}
	return resp, nil
}

// GetClusterMap returns the node's current map (epoch 0 and no segments before it has one).
func (h *kvHandler) GetClusterMap(_ context.Context) (*zaris.ClusterMap, error) {
	if v := h.n.current.Load(); v != nil {
		return v.public, nil
	}
	return &zaris.ClusterMap{Nodes: []*zaris.NodeInfo{}, Segments: []*zaris.SegmentInfo{}}, nil
}
