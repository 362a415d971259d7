package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
	"github.com/clustron/zaris-go/tools/store"
)

// answer is one answered attempt (Ok, NotFound or Conflict: the call's end) as the
// transport saw it.
type answer struct {
	at   time.Duration // from the first data call
	addr uint16        // index into recorder.addrs
	seg  int16
}

// recorder watches every connection the client opens, through its dialer: it notes each
// answered data call (time, node address, segment), the epochs answers carry and the map
// fetches. It sees attempts, not calls, but an answered attempt ends its call.
type recorder struct {
	segments int32
	start    atomic.Int64 // UnixNano of the first data call; 0 before it
	fetches  atomic.Int64 // GetClusterMap calls
	minEpoch atomic.Int64
	maxEpoch atomic.Int64

	mu      sync.Mutex // protects addrs and answers
	addrs   []string
	answers []answer
}

func newRecorder(segments int32) *recorder {
	r := &recorder{segments: segments}
	r.minEpoch.Store(1 << 62)
	return r
}

// dialer wraps base so each connection's client reports to r.
func (r *recorder) dialer(base runtime.Dialer) runtime.Dialer {
	return func(ctx context.Context, addr string) (runtime.Conn, error) {
		c, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		idx := -1
		for i, a := range r.addrs {
			if a == addr {
				idx = i
			}
		}
		if idx < 0 {
			idx = len(r.addrs)
			r.addrs = append(r.addrs, addr)
		}
		r.mu.Unlock()
		return &recConn{Conn: c, kv: &recKv{inner: c.Client().(zaris.ZarisKv), r: r, addr: uint16(idx)}}, nil
	}
}

func (r *recorder) begin() {
	r.start.CompareAndSwap(0, time.Now().UnixNano())
}

func (r *recorder) note(addr uint16, key []byte, status zaris.KvStatus, epoch int64) {
	if epoch > 0 {
		for v := r.minEpoch.Load(); epoch < v && !r.minEpoch.CompareAndSwap(v, epoch); v = r.minEpoch.Load() {
		}
		for v := r.maxEpoch.Load(); epoch > v && !r.maxEpoch.CompareAndSwap(v, epoch); v = r.maxEpoch.Load() {
		}
	}
	if status != zaris.KvStatus_Ok && status != zaris.KvStatus_NotFound && status != zaris.KvStatus_Conflict {
		return
	}
	a := answer{at: time.Duration(time.Now().UnixNano() - r.start.Load()), addr: addr, seg: int16(clustermap.SegmentOf(key, r.segments))}
	r.mu.Lock()
	r.answers = append(r.answers, a)
	r.mu.Unlock()
}

// snapshot returns the answers so far, in time order, and the addresses.
func (r *recorder) snapshot() ([]answer, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]answer(nil), r.answers...)
	sortAnswers(out)
	return out, append([]string(nil), r.addrs...)
}

// recConn is a connection whose client reports to a recorder. The engine calls a custom
// connection through its context (no socket deadline tricks), which costs a context per
// attempt on both sides of every comparison the churn section makes.
type recConn struct {
	runtime.Conn
	kv *recKv
}

func (c *recConn) Client() any { return c.kv }

type recKv struct {
	inner zaris.ZarisKv
	r     *recorder
	addr  uint16
}

func (k *recKv) Get(ctx context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	k.r.begin()
	resp, err := k.inner.Get(ctx, req)
	if err == nil && resp != nil {
		k.r.note(k.addr, req.Key, resp.Status, resp.MapEpoch)
	}
	return resp, err
}

func (k *recKv) Put(ctx context.Context, req *zaris.PutRequest) (*zaris.PutResponse, error) {
	k.r.begin()
	resp, err := k.inner.Put(ctx, req)
	if err == nil && resp != nil {
		k.r.note(k.addr, req.Key, resp.Status, resp.MapEpoch)
	}
	return resp, err
}

func (k *recKv) Delete(ctx context.Context, req *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	k.r.begin()
	resp, err := k.inner.Delete(ctx, req)
	if err == nil && resp != nil {
		k.r.note(k.addr, req.Key, resp.Status, resp.MapEpoch)
	}
	return resp, err
}

func (k *recKv) Increment(ctx context.Context, req *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	k.r.begin()
	resp, err := k.inner.Increment(ctx, req)
	if err == nil && resp != nil {
		k.r.note(k.addr, req.Key, resp.Status, resp.MapEpoch)
	}
	return resp, err
}

func (k *recKv) GetClusterMap(ctx context.Context) (*zaris.ClusterMap, error) {
	k.r.fetches.Add(1)
	return k.inner.GetClusterMap(ctx)
}

// defaultSegments is the store's segment count in every cluster the bench starts.
const defaultSegments = store.DefaultSegments
