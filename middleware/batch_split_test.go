package middleware_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// One owner's items larger together than BatchMaxBytes go in several sub-requests to that
// owner, each within the bound or of a single item, in request order; every item is answered
// with its own result. Owners whose items fit get one sub-request each.
func TestBatches_SplitsAnOwnersItemsBySize(t *testing.T) {
	const third = middleware.BatchMaxBytes / 3
	// Keys ending in 0 go to node 1, in 1 to node 2 (ownerByLastByte).
	sizes := map[string]int{
		"a0": third, "b0": third, "c0": third, // 3 thirds and their overhead: over the bound
		"d0": middleware.BatchMaxBytes + 1, // alone
		"e0": 10, "f1": third, "g1": third,
	}
	order := []string{"a0", "f1", "b0", "c0", "d0", "g1", "e0"}
	req := &zaris.MultiPutRequest{}
	for _, k := range order {
		req.Items = append(req.Items, &zaris.PutItem{Key: []byte(k), Value: bytes.Repeat([]byte{k[0]}, sizes[k])})
	}

	var mu sync.Mutex
	var subs []string // per sub-request: its node and keys
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		items := call.Request.(*zaris.MultiPutRequest).Items
		total, keys := 0, ""
		resp := &zaris.MultiPutResponse{Status: zaris.KvStatus_Ok}
		for _, it := range items {
			total += 40 + len(it.Key) + len(it.Value)
			keys += string(it.Key) + " "
			resp.Results = append(resp.Results, &zaris.PutOutcome{Status: zaris.KvStatus_Ok, Version: int64(len(it.Value))})
		}
		if len(items) > 1 {
			assert.LessOrEqual(t, total, middleware.BatchMaxBytes, "sub-request %s", keys)
		}
		mu.Lock()
		subs = append(subs, fmt.Sprintf("node%d: %s", call.Target.Node, keys))
		mu.Unlock()
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent, a.Answered, a.Status = call.Target.Node, call.Target.Addr, true, true, runtime.Status(zaris.KvStatus_Ok)
		return resp, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	res, err := zarisclient.New(batches(transport)).MultiPut(context.Background(), req)
	require.NoError(t, err)
	for i, k := range order {
		require.NoError(t, res.Err(i), k)
		assert.Equal(t, int64(sizes[k]), res.Response.Results[i].Version, "the result of %s", k)
	}
	assert.ElementsMatch(t, []string{"node1: a0 b0 ", "node1: c0 ", "node1: d0 ", "node1: e0 ", "node2: f1 g1 "}, subs)
}

// A sub-request that fails on its connection (a node closes it on a reply over its
// limit) has its items sent in sub-requests of at most half as many items in the next
// rounds: five items to one owner whose replies fit two at a time are all answered in
// three rounds ([5], then [3] [2], then [2] [1]).
func TestBatches_HalvesASubRequestThatFailedOnItsConnection(t *testing.T) {
	var mu sync.Mutex
	var sizes []int // per sub-request, its items, in the order sent
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		items := call.Request.(*zaris.MultiGetRequest).Items
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent = call.Target.Node, call.Target.Addr, true
		if len(items) > 2 {
			a.Err, a.Class = fmt.Errorf("reply too large: %w", runtime.ErrTransport), runtime.Retry
			return nil, a.Err
		}
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for _, it := range items {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok, Value: it.Key})
		}
		return resp, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	req := &zaris.MultiGetRequest{}
	for _, k := range []string{"a0", "b0", "c0", "d0", "e0"} {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	res, err := zarisclient.New(batches(transport)).MultiGet(context.Background(), req)
	require.NoError(t, err)
	for i, it := range req.Items {
		require.NoError(t, res.Err(i))
		assert.Equal(t, it.Key, res.Response.Results[i].Value)
	}
	assert.ElementsMatch(t, []int{5, 3, 2, 2, 1}, sizes)
}

// Random batches over three owners, cut by size and halved after transport failures: every
// sub-request goes to its items' owner, keeps request order, and each item gets its own
// result.
func TestBatches_CutKeepsOwnersOrderAndResults(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		n := 1 + r.IntN(40)
		req := &zaris.MultiPutRequest{}
		for i := range n {
			size := r.IntN(700 << 10)
			if r.IntN(10) == 0 {
				size = 0
			}
			key := fmt.Sprintf("k%d-%c", i, byte('0'+r.IntN(3)))
			req.Items = append(req.Items, &zaris.PutItem{Key: []byte(key), Value: make([]byte, size)})
		}
		limit := 1<<20 + r.IntN(3<<20) // the fake node's limit on a request's values
		var mu sync.Mutex
		var bad []string
		transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
			items := call.Request.(*zaris.MultiPutRequest).Items
			a := call.StartAttempt()
			a.Node, a.Addr, a.Sent = call.Target.Node, call.Target.Addr, true
			total, prev := 0, -1
			resp := &zaris.MultiPutResponse{Status: zaris.KvStatus_Ok}
			for _, it := range items {
				k := string(it.Key)
				idx, _ := strconv.Atoi(strings.Split(k[1:], "-")[0])
				if idx <= prev {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("seed %d: item %d after %d", seed, idx, prev))
					mu.Unlock()
				}
				prev = idx
				if want := int32(k[len(k)-1]%3 + 1); want != call.Target.Node {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("seed %d: %s sent to node %d", seed, k, call.Target.Node))
					mu.Unlock()
				}
				total += len(it.Value)
				resp.Results = append(resp.Results, &zaris.PutOutcome{Status: zaris.KvStatus_Ok, Version: int64(idx)})
			}
			if total > limit && len(items) > 1 {
				a.Err, a.Class = fmt.Errorf("too large: %w", runtime.ErrTransport), runtime.Retry
				return nil, a.Err
			}
			a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
			return resp, nil
		}
		batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
		res, err := zarisclient.New(batches(transport)).MultiPut(context.Background(), req, runtime.WithMaxAttempts(12))
		require.NoError(t, err, "seed %d", seed)
		require.Empty(t, bad)
		for i := range req.Items {
			require.NoError(t, res.Err(i), "seed %d item %d", seed, i)
			require.Equal(t, int64(i), res.Response.Results[i].Version, "seed %d: item %d got another's result", seed, i)
		}
	}
}

// switchingRouter routes "x" to node 1 and "y" to node 2 until the map is refreshed, and
// both to node 1 after.
type switchingRouter struct{ refreshed *atomic.Bool }

func (r switchingRouter) Route(key []byte) (clustermap.Route, error) {
	if string(key) == "y" && !r.refreshed.Load() {
		return clustermap.Route{Node: 2, Addr: "node2:7002"}, nil
	}
	return clustermap.Route{Node: 1, Addr: "node1:7001"}, nil
}

// Batches: only a sub-request of several items that failed on its connection is cut in
// halves later; an item that failed alone shares its next sub-request with the others of
// its owner.
func TestBatches_ItemThatFailedAloneIsNotBound(t *testing.T) {
	refresher, refreshed := refreshingToEpoch2()
	var mu sync.Mutex
	var sizes []int // per sub-request of the second round, its items
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.StartAttempt()
		a.Node, a.Sent = call.Target.Node, true
		n := len(call.Request.(*zaris.MultiGetRequest).Items)
		if !refreshed.Load() {
			if call.Target.Node == 1 { // x fails on its connection
				a.Err, a.Class = runtime.ErrTransport, runtime.RefreshRetry
				return nil, a.Err
			}
			a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Moved) // y moves
			return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Moved}}}, nil
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range n {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
		}
		return resp, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, switchingRouter{refreshed}, nil)
	client := zarisclient.New(batches(transport))
	r, err := client.MultiGet(context.Background(), getsOf("x", "y"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.Equal(t, []int{2}, sizes, "x and y go together to their one owner")
}

// halvingTransport answers a MultiGet sub-request of at most two items Ok and fails a
// larger one on its connection (a reply over the node's limit); an item whose key starts
// with "m" is answered Moved until moved reports true. sizes records each sub-request's
// items.
func halvingTransport(moved func() bool, sizes *[]int, mu *sync.Mutex) middleware.Handler {
	return func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		items := call.Request.(*zaris.MultiGetRequest).Items
		mu.Lock()
		*sizes = append(*sizes, len(items))
		mu.Unlock()
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent = call.Target.Node, call.Target.Addr, true
		if len(items) > 2 {
			a.Err, a.Class = runtime.ErrTransport, runtime.Retry
			return nil, a.Err
		}
		a.Answered, a.Status = true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for _, it := range items {
			st := zaris.KvStatus_Ok
			if it.Key[0] == 'm' && !moved() {
				st = zaris.KvStatus_Moved
			}
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: st, Value: it.Key})
		}
		return resp, nil
	}
}

// noSizes hides how large a batch's items are.
type noSizes struct{ runtime.BatchItems }

func (noSizes) Size(int) int { return 0 }

// Batches: items that do not know their sizes are halved after a failure on their
// connection all the same ([5], then [3] [2], then [2] [1]).
func TestBatches_HalvesItemsWithoutSizes(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	hide := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			call.Batch.Items = noSizes{call.Batch.Items}
			return next(ctx, call)
		}
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(hide(batches(halvingTransport(func() bool { return true }, &sizes, &mu))))
	r, err := client.MultiGet(context.Background(), getsOf("a0", "b0", "c0", "d0", "e0"))
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{5, 3, 2, 2, 1}, sizes)
}

// movingRouter routes like ownerByLastByte, except that a key starting with "m" goes to
// node 1 once moved reports true.
type movingRouter struct{ moved func() bool }

func (r movingRouter) Route(key []byte) (clustermap.Route, error) {
	if key[0] == 'm' && r.moved() {
		return clustermap.Route{Node: 1, Addr: ownerAddrs[0]}, nil
	}
	return ownerByLastByte{}.Route(key)
}

// Batches: an item without a bound that joins items bounded after a failed sub-request
// does not lift their bound: a0 and b0, bound to 2 after [a0 b0 c0] failed, go without
// m1, which moved to their owner.
func TestBatches_UnboundItemKeepsTheOthersBound(t *testing.T) {
	refresher, refreshed := refreshingToEpoch2()
	var mu sync.Mutex
	var sizes []int
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, movingRouter{refreshed.Load}, nil)
	client := zarisclient.New(batches(halvingTransport(refreshed.Load, &sizes, &mu)))
	r, err := client.MultiGet(context.Background(), getsOf("a0", "b0", "m1", "c0"))
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{3, 1, 2, 2}, sizes, "[a0 b0 c0] [m1], then [a0 b0] [m1 c0]")
}

// Batches: an item larger than BatchMaxBytes that comes first goes alone, in a sub-request
// of its own, and no sub-request goes without items.
func TestBatches_LargeFirstItemGoesAlone(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(batches(halvingTransport(func() bool { return true }, &sizes, &mu)))
	big := strings.Repeat("a", middleware.BatchMaxBytes) + "0"
	r, err := client.MultiGet(context.Background(), getsOf(big, "b0"))
	require.NoError(t, err)
	require.NoError(t, r.Err(0))
	require.NoError(t, r.Err(1))
	assert.ElementsMatch(t, []int{1, 1}, sizes)
}

// Batches: items whose sizes add up to exactly BatchMaxBytes share one sub-request ("at
// most" BatchMaxBytes); one byte more and they go apart.
func TestBatches_ItemsOfExactlyBatchMaxBytesGoTogether(t *testing.T) {
	for _, extra := range []int{0, 1} {
		var mu sync.Mutex
		var sizes []int
		batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
		client := zarisclient.New(batches(halvingTransport(func() bool { return true }, &sizes, &mu)))
		// A MultiGet item's size is 16 bytes and its key.
		half := middleware.BatchMaxBytes/2 - 16
		a := strings.Repeat("a", half-1) + "0"
		b := strings.Repeat("b", half-1+extra) + "0"
		_, err := client.MultiGet(context.Background(), getsOf(a, b))
		require.NoError(t, err)
		if extra == 0 {
			assert.Equal(t, []int{2}, sizes)
		} else {
			assert.ElementsMatch(t, []int{1, 1}, sizes)
		}
	}
}

// Batches: a chunk of items with different bounds holds at most as many items as the
// smallest bound. m1 and mm1 failed in a sub-request of two (bound 1), a0, b0 and c0 in
// one of three (bound 2); once all are one owner's, m1 and mm1 go alone.
func TestBatches_SmallestBoundWins(t *testing.T) {
	refresher, refreshed := refreshingToEpoch2()
	var mu sync.Mutex
	var sizes []int
	ok := halvingTransport(func() bool { return true }, &sizes, &mu)
	transport := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		if call.Target.Node == 2 && !refreshed.Load() { // node 2 fails whatever it is sent
			mu.Lock()
			sizes = append(sizes, len(call.Request.(*zaris.MultiGetRequest).Items))
			mu.Unlock()
			a := call.StartAttempt()
			a.Node, a.Sent, a.Err, a.Class = 2, true, runtime.ErrTransport, runtime.RefreshRetry
			return nil, a.Err
		}
		return ok(ctx, call)
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), refresher, movingRouter{refreshed.Load}, nil)
	client := zarisclient.New(batches(transport))
	r, err := client.MultiGet(context.Background(), getsOf("m1", "a0", "b0", "c0", "mm1"))
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, r.Err(i))
	}
	assert.ElementsMatch(t, []int{3, 2, 1, 2, 1, 1}, sizes, "[a0 b0 c0] [m1 mm1], then [m1] [a0 b0] [c0] [mm1]")
}

// refreshingToEpoch2 returns a refresher at epoch 1 whose refreshes fetch epoch 2, and the
// flag its first refresh sets.
func refreshingToEpoch2() (*mwt.Refresher, *atomic.Bool) {
	refreshed := new(atomic.Bool)
	refresher := mwt.NewRefresher(1)
	refresher.OnRefresh = func(context.Context, clustermap.Evidence) clustermap.RefreshResult {
		refreshed.Store(true)
		return clustermap.RefreshResult{Performed: true, Epoch: 2}
	}
	return refresher, refreshed
}
