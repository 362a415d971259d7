package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// These tests run multi-key calls through the typed client, the default stack and the
// engine, against fake nodes (churnNode) on a fake clock.

func (n *churnNode) MultiGet(context.Context, *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

func (n *churnNode) MultiPut(context.Context, *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

func (n *churnNode) MultiDelete(context.Context, *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "not served")
}

// batchNode is a churnNode that serves MultiGet and MultiPut item by item: an item of a
// segment its view gives it is served (Get answers its id as the value), any other Moved;
// status overrides the answer for a key. It records the keys of each sub-request.
type batchNode struct {
	*churnNode
	status map[string]zaris.KvStatus
	// epoch, when set, is the map epoch the node's answers carry.
	epoch int64

	mu       sync.Mutex
	got      [][]string // the keys of each sub-request, in arrival order
	versions map[string]int64
	// loseReply, when set, makes the next MultiPut apply its items and then fail like a
	// lost reply.
	loseReply atomic.Bool
}

func newBatchNode(id int32, view func() *zaris.ClusterMap) *batchNode {
	return &batchNode{churnNode: &churnNode{id: id, view: view}, versions: map[string]int64{}}
}

func (n *batchNode) owns(key []byte) (bool, int64) {
	m := n.view()
	s := m.Segments[clustermap.SegmentOf(key, m.SegmentCount)]
	if n.epoch != 0 {
		return s.Owner != nil && *s.Owner == n.id, n.epoch
	}
	return s.Owner != nil && *s.Owner == n.id, m.Epoch
}

func (n *batchNode) record(keys []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, keys)
}

func (n *batchNode) subRequests() [][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

func (n *batchNode) MultiGet(_ context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
	var keys []string
	for _, it := range req.Items {
		keys = append(keys, string(it.Key))
		owned, epoch := n.owns(it.Key)
		resp.MapEpoch = epoch
		r := &zaris.GetOutcome{Status: zaris.KvStatus_Moved}
		if s, ok := n.status[string(it.Key)]; ok {
			r.Status = s
		} else if owned {
			r.Status, r.Value = zaris.KvStatus_Ok, []byte(fmt.Sprint(n.id))
		}
		resp.Results = append(resp.Results, r)
	}
	n.record(keys)
	return resp, nil
}

func (n *batchNode) MultiPut(_ context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	resp := &zaris.MultiPutResponse{Status: zaris.KvStatus_Ok}
	var keys []string
	n.mu.Lock()
	for _, it := range req.Items {
		k := string(it.Key)
		keys = append(keys, k)
		r := &zaris.PutOutcome{Status: zaris.KvStatus_Ok, Version: n.versions[k]}
		if it.IsSetIfMatchVersion() && it.GetIfMatchVersion() != n.versions[k] {
			r.Status = zaris.KvStatus_Conflict
		} else {
			n.versions[k]++
			r.Version = n.versions[k]
		}
		resp.Results = append(resp.Results, r)
	}
	n.mu.Unlock()
	n.record(keys)
	if n.loseReply.CompareAndSwap(true, false) {
		return nil, thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION, "reply lost")
	}
	return resp, nil
}

// keysIn returns n distinct keys whose segments (of 8) have the given parity: under
// twoNodeMap(1, 0) node 2 owns the odd ones and node 1 the even ones.
func keysIn(odd bool, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("k%d", i)
		if (clustermap.SegmentOf([]byte(k), 8)%2 == 1) == odd {
			out = append(out, k)
		}
	}
	return out
}

// batchRig is two batchNodes, an engine on a fake clock and the typed client over the
// default stack, with counters for the call-level and attempt-level middleware.
type batchRig struct {
	clock          *mwt.Clock
	nodes          map[string]*batchNode
	cluster        *runtime.Engine
	client         *zarisclient.Client
	calls, attempt atomic.Int32
	moved          atomic.Bool                      // the view: false twoNodeMap(1, 0), true twoNodeMap(2, 2)
	custom         atomic.Pointer[zaris.ClusterMap] // the view, when set
}

func newBatchRig(t *testing.T) *batchRig {
	r := &batchRig{clock: mwt.NewClock()}
	view := func() *zaris.ClusterMap {
		if m := r.custom.Load(); m != nil {
			return m
		}
		if r.moved.Load() {
			return twoNodeMap(2, 2)
		}
		return twoNodeMap(1, 0)
	}
	r.nodes = map[string]*batchNode{"node1:7001": newBatchNode(1, view), "node2:7002": newBatchNode(2, view)}
	dial := func(_ context.Context, addr string) (runtime.Conn, error) { return churnConn{r.nodes[addr]}, nil }
	count := func(n *atomic.Int32) middleware.Middleware {
		return func(next middleware.Handler) middleware.Handler {
			return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				n.Add(1)
				return next(ctx, call)
			}
		}
	}
	client, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds("node1:7001"), runtime.WithDialer(dial), runtime.WithClock(r.clock),
		runtime.WithCallMiddleware(count(&r.calls)), runtime.WithAttemptMiddleware(count(&r.attempt)))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	r.client, r.cluster = client, client.Engine()
	r.clock.Advance(time.Second) // past the bootstrap's debounce window
	return r
}

// stack returns a typed client over r's engine whose default stack is built from the
// engine's configuration without r's counters, changed by edit.
func (r *batchRig) stack(edit func(cfg *runtime.Config)) *zarisclient.Client {
	cfg := r.cluster.Config()
	cfg.CallMiddleware, cfg.AttemptMiddleware = nil, nil
	edit(&cfg)
	return zarisclient.New(middleware.Default(r.cluster.Invoke, r.cluster.Refresher(), cfg))
}

func getReq(keys ...string) *zaris.MultiGetRequest {
	req := &zaris.MultiGetRequest{}
	for _, k := range keys {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	return req
}

// Items are split by owner, one sub-request each, and merged back in request order; a key
// given twice is sent twice and answered twice.
func TestBatch_SplitByOwnerMergedInOrderWithDuplicates(t *testing.T) {
	r := newBatchRig(t)
	odd, even := keysIn(true, 3), keysIn(false, 3)
	keys := []string{even[0], odd[0], odd[1], even[1], even[0], odd[2], even[2], odd[0]}
	res, err := r.client.MultiGet(context.Background(), getReq(keys...))
	require.NoError(t, err)
	require.Len(t, res.Response.Results, len(keys))
	for i, k := range keys {
		want := "1"
		if slices.Contains(odd, k) {
			want = "2"
		}
		assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[i].Status, "item %d", i)
		assert.Equal(t, want, string(res.Response.Results[i].Value), "item %d (%s) served by its owner", i, k)
		assert.NoError(t, res.Err(i))
	}
	assert.Equal(t, [][]string{{even[0], even[1], even[0], even[2]}}, r.nodes["node1:7001"].subRequests())
	assert.Equal(t, [][]string{{odd[0], odd[1], odd[2], odd[0]}}, r.nodes["node2:7002"].subRequests())
	assert.Equal(t, int32(1), r.calls.Load(), "call-level middleware sees the batch once")
	assert.Equal(t, int32(2), r.attempt.Load(), "attempt-level middleware sees each sub-request")
	assert.Empty(t, r.clock.Sleeps())
}

// One owner answers Moved for its items (its segments moved to the other node): only those
// items are retried, after one backoff and one map refresh, on the new owner; the items
// the other owner answered are not resent.
func TestBatch_MovedItemsRetriedAfterOneRefreshOnNewOwner(t *testing.T) {
	r := newBatchRig(t)
	odd, even := keysIn(true, 3), keysIn(false, 4)
	keys := []string{even[0], odd[0], even[1], odd[1], even[2], odd[2], even[3]}
	r.moved.Store(true) // node 1's segments are now node 2's; the client's map is older
	// The answers carry no newer epoch, so nothing refreshes the map during the first
	// round: node 1's sub-request reaches node 1 whichever sub-request ends first.
	r.nodes["node1:7001"].epoch, r.nodes["node2:7002"].epoch = 1, 1
	fetches0 := r.cluster.Refresher().Stats().Performed

	res, err := r.client.MultiGet(context.Background(), getReq(keys...))
	require.NoError(t, err)
	for i := range keys {
		assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[i].Status, "item %d", i)
		assert.Equal(t, "2", string(res.Response.Results[i].Value), "item %d served by the new owner", i)
		assert.NoError(t, res.Err(i))
	}
	assert.Equal(t, [][]string{{even[0], even[1], even[2], even[3]}}, r.nodes["node1:7001"].subRequests())
	assert.Equal(t, [][]string{{odd[0], odd[1], odd[2]}, {even[0], even[1], even[2], even[3]}},
		r.nodes["node2:7002"].subRequests(), "the odd items were not resent")
	assert.Equal(t, fetches0+1, r.cluster.Refresher().Stats().Performed, "one refresh for the batch")
	assert.Equal(t, []time.Duration{100 * time.Millisecond}, r.clock.Sleeps(), "one backoff for the batch")
	assert.Equal(t, int64(2), r.cluster.Map().Epoch)
	assert.Equal(t, int32(1), r.calls.Load())
	assert.Equal(t, int32(3), r.attempt.Load(), "two sub-requests, then one")
}

// Answers (Ok, NotFound, Conflict, InvalidRequest) come back per item and are never
// retried, whatever the other items met.
func TestBatch_MixedAnswersNeverRetried(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 4)
	n1 := r.nodes["node1:7001"]
	n1.status = map[string]zaris.KvStatus{even[1]: zaris.KvStatus_NotFound, even[2]: zaris.KvStatus_Conflict, even[3]: zaris.KvStatus_InvalidRequest}
	res, err := r.client.MultiGet(context.Background(), getReq(even...))
	require.NoError(t, err)
	want := []zaris.KvStatus{zaris.KvStatus_Ok, zaris.KvStatus_NotFound, zaris.KvStatus_Conflict, zaris.KvStatus_InvalidRequest}
	for i := range even {
		assert.Equal(t, want[i], res.Response.Results[i].Status, "item %d", i)
		assert.NoError(t, res.Err(i), "an answer is not an error")
	}
	assert.Len(t, n1.subRequests(), 1)
	assert.Empty(t, r.clock.Sleeps())
}

// Items answered Migrating are retried after the longer backoff (x8) without a refresh;
// an item that stays Migrating runs out of attempts with its own error and history, while
// the others keep their answers and the call returns no error.
func TestBatch_ItemOutOfAttemptsGetsItsOwnError(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 3)
	r.nodes["node1:7001"].status = map[string]zaris.KvStatus{even[1]: zaris.KvStatus_Migrating}
	fetches0 := r.cluster.Refresher().Stats().Performed
	res, err := r.client.MultiGet(context.Background(), getReq(even...))
	require.NoError(t, err, "some items got an answer")
	assert.NoError(t, res.Err(0))
	assert.NoError(t, res.Err(2))
	var ce *runtime.CallError
	require.ErrorAs(t, res.Err(1), &ce)
	assert.Equal(t, runtime.BoundAttempts, ce.Bound)
	require.Len(t, ce.Attempts, 3)
	for _, a := range ce.Attempts {
		assert.Equal(t, runtime.Status(zaris.KvStatus_Migrating), a.Status)
	}
	assert.Equal(t, zaris.KvStatus_Migrating, res.Response.Results[1].Status, "the last status it met")
	assert.Equal(t, []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond}, r.clock.Sleeps())
	assert.Equal(t, fetches0, r.cluster.Refresher().Stats().Performed, "Migrating does not refresh")
	assert.Equal(t, [][]string{even, {even[1]}, {even[1]}}, r.nodes["node1:7001"].subRequests())
}

// When no item gets an answer the call returns a *batch.Error wrapping each item's.
func TestBatch_NoItemAnsweredIsACallError(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 2)
	r.nodes["node1:7001"].status = map[string]zaris.KvStatus{even[0]: zaris.KvStatus_Unavailable, even[1]: zaris.KvStatus_Unavailable}
	res, err := r.client.MultiGet(context.Background(), getReq(even...), runtime.WithMaxAttempts(2))
	var be *batch.Error
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Errs, 2)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Len(t, ce.Attempts, 2)
	assert.Equal(t, zaris.KvStatus_Unavailable, res.Response.Results[0].Status)
}

// Bad input: an empty batch and one over batch.MaxItems are refused before anything
// is sent (one of exactly batch.MaxItems is served); an item with an empty key (or a nil
// item) is answered InvalidRequest on its own and the other items are served.
func TestBatch_BadInput(t *testing.T) {
	r := newBatchRig(t)
	_, err := r.client.MultiGet(context.Background(), &zaris.MultiGetRequest{})
	assert.ErrorIs(t, err, runtime.ErrInvalidBatch)
	big := make([]string, batch.MaxItems+1)
	for i := range big {
		big[i] = fmt.Sprint(i)
	}
	_, err = r.client.MultiGet(context.Background(), getReq(big...))
	assert.ErrorIs(t, err, runtime.ErrInvalidBatch)
	assert.ErrorContains(t, err, "1001 items, at most 1000")
	_, err = r.client.MultiGet(context.Background(), nil)
	assert.ErrorIs(t, err, runtime.ErrNilRequest)
	assert.Empty(t, r.nodes["node1:7001"].subRequests())
	assert.Empty(t, r.nodes["node2:7002"].subRequests())
	res, err := r.client.MultiGet(context.Background(), getReq(big[:batch.MaxItems]...))
	require.NoError(t, err, "a batch of batch.MaxItems is served")
	assert.Len(t, res.Response.Results, batch.MaxItems)

	r = newBatchRig(t)
	even := keysIn(false, 1)
	req := getReq(even[0], "")
	req.Items = append(req.Items, nil)
	res, err = r.client.MultiGet(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[0].Status)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, res.Response.Results[1].Status)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, res.Response.Results[2].Status)
	assert.Equal(t, [][]string{{even[0]}}, r.nodes["node1:7001"].subRequests(), "only the valid item was sent")

	// No item valid: nothing is sent and every item is answered.
	res, err = r.client.MultiGet(context.Background(), getReq("", ""))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, res.Response.Results[1].Status)
}

// nonIdempotentMultiPut returns a typed client over r's engine whose MultiPut calls are of
// a copy of OpMultiPut that is not idempotent, and makes node 1 lose the reply to the next
// MultiPut it applies.
func nonIdempotentMultiPut(r *batchRig) (*zarisclient.Client, *batchNode) {
	op := *zarisclient.OpMultiPut
	op.Idempotent = false
	asNonIdempotent := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			call.Op = &op
			return next(ctx, call)
		}
	}
	n1 := r.nodes["node1:7001"]
	n1.loseReply.Store(true)
	return r.stack(func(cfg *runtime.Config) { cfg.CallMiddleware = []runtime.Middleware{asNonIdempotent} }), n1
}

// Rules B2 and R9 per item: a sub-request of a non-idempotent operation is applied and its
// reply lost. The unguarded item is reported in doubt and never replayed; the guarded item
// is replayed and comes back Conflict (it was applied the first time).
func TestB2_BatchInDoubtItemNotReplayedGuardedItemConflicts(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 2)
	client, n1 := nonIdempotentMultiPut(r)
	res, err := client.MultiPut(context.Background(), &zaris.MultiPutRequest{Items: []*zaris.PutItem{
		{Key: []byte(even[0]), Value: []byte("a")},
		{Key: []byte(even[1]), Value: []byte("b"), IfMatchVersion: thrift.Int64Ptr(0)},
	}})
	require.NoError(t, err, "the guarded item got an answer")
	assert.ErrorIs(t, res.Err(0), runtime.ErrInDoubt)
	assert.NoError(t, res.Err(1))
	assert.Equal(t, zaris.KvStatus_Conflict, res.Response.Results[1].Status, "the replay found its own write")
	assert.Equal(t, [][]string{{even[0], even[1]}, {even[1]}}, n1.subRequests(), "the in-doubt item was not replayed")
	assert.Equal(t, int64(1), n1.versions[even[0]], "applied once")
}

// A batch call whose items all go in doubt says so through errors.Is.
func TestB2_BatchAllInDoubt(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 1)
	client, n1 := nonIdempotentMultiPut(r)
	_, err := client.MultiPut(context.Background(), &zaris.MultiPutRequest{Items: []*zaris.PutItem{{Key: []byte(even[0]), Value: []byte("a")}}})
	assert.ErrorIs(t, err, runtime.ErrInDoubt)
	assert.True(t, strings.Contains(err.Error(), "none of 1 items"), err.Error())
	assert.Len(t, n1.subRequests(), 1)
}

// Through a handler without the batch layer the request goes whole, and an item whose
// status is churn is reported as an item without an answer.
func TestBatch_WithoutBatchLayerChurnIsAnItemError(t *testing.T) {
	h := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		require.NotNil(t, call.Batch)
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 3, Results: []*zaris.GetOutcome{
			{Status: zaris.KvStatus_Ok, Value: []byte("v")}, {Status: zaris.KvStatus_Moved}, {Status: zaris.KvStatus_NotFound},
		}}, nil
	}
	res, err := zarisclient.New(h).MultiGet(context.Background(), getReq("a", "b", "c"))
	require.NoError(t, err)
	assert.NoError(t, res.Err(0))
	var se *runtime.StatusError
	require.ErrorAs(t, res.Err(1), &se)
	assert.Equal(t, runtime.Status(zaris.KvStatus_Moved), se.Status)
	assert.NoError(t, res.Err(2))
	assert.Equal(t, "v", string(res.Response.Results[0].Value))
	assert.Equal(t, int64(3), res.Response.MapEpoch)
}

// Both bounds hold per batch (rule R4): an item that keeps meeting churn ends at the call's
// deadline even with attempts left, the last backoff clamped to the time left.
func TestBatch_DeadlineBoundsTheRetries(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 2)
	r.nodes["node1:7001"].status = map[string]zaris.KvStatus{even[1]: zaris.KvStatus_Unavailable}
	res, err := r.client.MultiGet(context.Background(), getReq(even...),
		runtime.WithTimeout(250*time.Millisecond), runtime.WithMaxAttempts(10))
	require.NoError(t, err)
	assert.NoError(t, res.Err(0))
	var ce *runtime.CallError
	require.ErrorAs(t, res.Err(1), &ce)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Len(t, ce.Attempts, 2)
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 150 * time.Millisecond}, r.clock.Sleeps())
}

// With a retry budget (rule B3) a batch call deposits once, its sub-requests do not, and a
// retry round takes a token per sub-request: with none to take, the items that met churn
// end with the budget's bound after one attempt, and the others keep their answers.
func TestB3_BatchRetriesTakeFromTheBudget(t *testing.T) {
	r := newBatchRig(t)
	budget, err := middleware.NewTokenBudget(middleware.BudgetPolicy{}, r.clock)
	require.NoError(t, err)
	client := r.stack(func(cfg *runtime.Config) { cfg.RetryBudget = budget })
	even := keysIn(false, 2)
	r.nodes["node1:7001"].status = map[string]zaris.KvStatus{even[1]: zaris.KvStatus_Unavailable}
	res, err := client.MultiGet(context.Background(), getReq(even...))
	require.NoError(t, err)
	assert.NoError(t, res.Err(0))
	var ce *runtime.CallError
	require.ErrorAs(t, res.Err(1), &ce)
	assert.Equal(t, runtime.BoundBudget, ce.Bound)
	assert.ErrorIs(t, ce, runtime.ErrRetryBudgetExhausted)
	assert.Len(t, ce.Attempts, 1)
	assert.Len(t, r.nodes["node1:7001"].subRequests(), 1, "the retry was not sent")

	// Each call deposits one token: the batch call's lets one retry round go, and the
	// next is refused. Were its sub-requests depositing too, the item would have run out of
	// attempts instead.
	budget, err = middleware.NewTokenBudget(middleware.BudgetPolicy{Ratio: 1, MaxBanked: 100}, r.clock)
	require.NoError(t, err)
	client = r.stack(func(cfg *runtime.Config) { cfg.RetryBudget = budget })
	odd := keysIn(true, 2)
	res, err = client.MultiGet(context.Background(), getReq(even[0], odd[0], even[1], odd[1]), runtime.WithMaxAttempts(4))
	require.NoError(t, err)
	require.ErrorAs(t, res.Err(2), &ce)
	assert.Equal(t, runtime.BoundBudget, ce.Bound)
	assert.Len(t, ce.Attempts, 2)
}

// A sub-request goes to the owner its items were split for, even when the client learns a
// newer map before sending it: that node answers each item from its own map, so only the
// item whose segment moved is retried. (Routed by its first key instead, the whole
// sub-request would follow that key to the new owner, which would answer Moved for all the
// others.)
func TestBatch_SubRequestGoesToTheOwnerItWasSplitFor(t *testing.T) {
	r := newBatchRig(t)
	even, odd := keysIn(false, 4), keysIn(true, 1)
	m := twoNodeMap(2, 0)
	two := int32(2)
	m.Segments[clustermap.SegmentOf([]byte(even[0]), 8)].Owner = &two
	var once sync.Once
	learnNewMap := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			once.Do(func() {
				r.custom.Store(m)
				r.cluster.Refresher().Refresh(ctx, clustermap.Evidence{Epoch: 2})
			})
			return next(ctx, call)
		}
	}
	client := r.stack(func(cfg *runtime.Config) { cfg.AttemptMiddleware = []runtime.Middleware{learnNewMap} })
	res, err := client.MultiGet(context.Background(), getReq(even[0], odd[0], even[1], even[2], even[3]))
	require.NoError(t, err)
	require.Equal(t, int64(2), r.cluster.Map().Epoch, "the client learnt the new map before sending")
	for i := range 5 {
		assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[i].Status, "item %d", i)
	}
	assert.Equal(t, "2", string(res.Response.Results[0].Value), "the moved item served by its new owner")
	assert.Equal(t, [][]string{{even[0], even[1], even[2], even[3]}}, r.nodes["node1:7001"].subRequests())
	assert.Equal(t, [][]string{{odd[0]}, {even[0]}}, r.nodes["node2:7002"].subRequests())
}

// killOutcome is what one key's read met when its owner died: the node of each attempt,
// the error it ended with (nil: answered), the backoffs slept and the refresher's counts.
type killOutcome struct {
	nodes   []int32
	value   string
	bound   runtime.Bound
	sleeps  []time.Duration
	fetched uint64 // map fetches after the kill
	skipped uint64 // refresh requests debounced after the kill
}

// readUnderAKill reads an even key (node 1's) with read, on a fresh client over two fake
// nodes: node 1 dies at t0 and the store fails its segments over to node 2 at t0+10ms (map
// epoch 2), as the store does a killed node; the client's last map fetch completed
// lastRefresh before t0.
func readUnderAKill(t *testing.T, lastRefresh time.Duration, read func(*zarisclient.Client, string) ([]runtime.Attempt, string, error)) killOutcome {
	clock := mwt.NewClock()
	t0 := mwt.Epoch.Add(2 * time.Second)
	view := func() *zaris.ClusterMap {
		if clock.Now().Before(t0.Add(10 * time.Millisecond)) {
			return twoNodeMap(1, 0)
		}
		return twoNodeMap(2, 2)
	}
	nodes := map[string]*batchNode{"node1:7001": newBatchNode(1, view), "node2:7002": newBatchNode(2, view)}
	var dead atomic.Bool
	dial := func(_ context.Context, addr string) (runtime.Conn, error) {
		if addr != "node1:7001" {
			return churnConn{nodes[addr]}, nil
		}
		if dead.Load() {
			return nil, errors.New("connection refused")
		}
		return churnConn{killable{nodes[addr], &dead}}, nil
	}
	client, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds("node1:7001", "node2:7002"), runtime.WithDialer(dial), runtime.WithClock(clock))
	require.NoError(t, err)
	defer client.Close()
	refresher := client.Engine().Refresher()
	clock.Advance(t0.Add(-lastRefresh).Sub(clock.Now()))
	require.True(t, refresher.Refresh(context.Background(), clustermap.Evidence{}).Performed)
	clock.Advance(t0.Sub(clock.Now()))
	dead.Store(true)
	before := refresher.Stats()

	attempts, value, err := read(client, keysIn(false, 1)[0])
	out := killOutcome{value: value, sleeps: clock.Sleeps()}
	for _, a := range attempts {
		out.nodes = append(out.nodes, a.Node)
	}
	if err != nil {
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		out.bound = ce.Bound
		for _, a := range ce.Attempts {
			out.nodes = append(out.nodes, a.Node)
			assert.True(t, errors.Is(a.Err, runtime.ErrNodeUnavailable) || errors.Is(a.Err, runtime.ErrTransport), "%v", a.Err)
		}
	}
	after := refresher.Stats()
	out.fetched, out.skipped = after.Performed-before.Performed, after.Debounced-before.Debounced
	return out
}

// killable is a node whose connections fail once dead is set, like those of a killed process.
type killable struct {
	*batchNode
	dead *atomic.Bool
}

func (k killable) Get(ctx context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	if k.dead.Load() {
		return nil, thrift.NewTTransportException(thrift.END_OF_FILE, "EOF")
	}
	return k.batchNode.Get(ctx, req)
}

func (k killable) MultiGet(ctx context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	if k.dead.Load() {
		return nil, thrift.NewTTransportException(thrift.END_OF_FILE, "EOF")
	}
	return k.batchNode.MultiGet(ctx, req)
}

// lastCall is call-level middleware that keeps the last call it saw.
func lastCall(p *atomic.Pointer[runtime.Call]) runtime.Middleware {
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			p.Store(call)
			return resp, err
		}
	}
}

// An item of a MultiGet whose owner dies gets what a single Get of its key gets in the same
// place: the same attempts at the same nodes, the same backoffs and the same refreshes (one
// per retry, R3), so it is answered exactly when the Get is. When the client fetched a map
// within the debounce window before the kill (R6) and no answer shows the failover's epoch
// (B1), the refresh after the reset is deferred to the window's end, and once the dial is
// refused the next attempt waits for that fetch instead of backing off (B7): both find the
// new owner on their third attempt, 450 ms after the kill.
func TestBatch_ItemUnderAKillGetsWhatASingleGetGets(t *testing.T) {
	get := func(c *zarisclient.Client, key string) ([]runtime.Attempt, string, error) {
		var call atomic.Pointer[runtime.Call]
		kv := zarisclient.New(middleware.Default(c.Engine().Invoke, c.Engine().Refresher(), withCallMiddleware(c, lastCall(&call))))
		resp, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte(key)})
		if err != nil {
			return nil, "", err
		}
		return call.Load().Attempts, string(resp.Value), nil
	}
	multiGet := func(c *zarisclient.Client, key string) ([]runtime.Attempt, string, error) {
		var call atomic.Pointer[runtime.Call]
		kv := zarisclient.New(middleware.Default(c.Engine().Invoke, c.Engine().Refresher(), withCallMiddleware(c, lastCall(&call))))
		// With a key of the live node, answered in the first round.
		res, err := kv.MultiGet(context.Background(), getReq(key, keysIn(true, 1)[0]))
		require.NoError(t, err)
		require.NoError(t, res.Err(1))
		if err := res.Err(0); err != nil {
			return nil, "", err
		}
		return call.Load().Batch.Attempts[0], string(res.Response.Results[0].Value), nil
	}
	for _, tc := range []struct {
		name        string
		lastRefresh time.Duration
		want        killOutcome
	}{
		{"the last refresh long before: the first retry finds the new owner", time.Second,
			killOutcome{nodes: []int32{1, 2}, value: "2", sleeps: []time.Duration{100 * time.Millisecond}, fetched: 1}},
		{"the last refresh 50ms before: B7 waits out the window for the new owner", 50 * time.Millisecond,
			killOutcome{nodes: []int32{1, 1, 2}, value: "2",
				sleeps: []time.Duration{100 * time.Millisecond, 350 * time.Millisecond}, fetched: 1, skipped: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			single := readUnderAKill(t, tc.lastRefresh, get)
			item := readUnderAKill(t, tc.lastRefresh, multiGet)
			assert.Equal(t, tc.want, single, "single Get")
			assert.Equal(t, single, item, "the MultiGet item gets what the Get gets")
		})
	}
}

// withCallMiddleware is c's engine configuration with mw as its call-level middleware.
func withCallMiddleware(c *zarisclient.Client, mw ...runtime.Middleware) runtime.Config {
	cfg := c.Engine().Config()
	cfg.CallMiddleware = mw
	return cfg
}

// A batch that ends before any sub-request is sent (its context already ended, or a
// per-call timeout of zero) gives each item the error a single Get gets: a *CallError with
// the same bound, no attempt, and the same cause, not one wrapped in another.
func TestBatch_EndedBeforeSendingIsWhatASingleCallGets(t *testing.T) {
	r := newBatchRig(t)
	even := keysIn(false, 2)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		ctx  context.Context
		opts []runtime.CallOption
	}{
		"cancelled":    {cancelled, nil},
		"zero timeout": {context.Background(), []runtime.CallOption{runtime.WithTimeout(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, single := r.client.Get(tc.ctx, &zaris.GetRequest{Key: []byte(even[0])}, tc.opts...)
			var want *runtime.CallError
			require.ErrorAs(t, single, &want)
			res, err := r.client.MultiGet(tc.ctx, getReq(even...), tc.opts...)
			require.Error(t, err)
			for i := range even {
				var ce *runtime.CallError
				require.ErrorAs(t, res.Err(i), &ce)
				assert.Equal(t, want.Bound, ce.Bound)
				assert.Empty(t, ce.Attempts)
				assert.Equal(t, want.Err, ce.Err, "the cause itself, not a call error around it")
				assert.Equal(t, strings.Replace(want.Error(), "Get", "MultiGet", 1), ce.Error())
			}
		})
	}
	assert.Empty(t, r.nodes["node1:7001"].subRequests())
}
