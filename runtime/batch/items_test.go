package batch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
)

// itemsOf runs a MultiGet of req through a stack that only looks at the call's items: it
// hands them to look and returns what look returns, as a batch layer that ran.
func itemsOf(t *testing.T, req *zaris.MultiGetRequest, look func(runtime.BatchItems) (runtime.Response, error)) (*zarisclient.MultiGetResult, error) {
	t.Helper()
	h := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		require.NotNil(t, call.Batch, "a multi-key call carries its batch")
		call.Batch.Ran = true
		call.Batch.Errs = make([]error, call.Batch.Items.Len())
		return look(call.Batch.Items)
	}
	return zarisclient.New(h).MultiGet(context.Background(), req)
}

// The items a call carries are the request's: their number, keys, sizes, and which are
// invalid (missing, or without a key); a sub-request carries the items asked for, in the
// order asked, and nothing else of them.
func TestItems_AreTheRequests(t *testing.T) {
	req := getReq("a", "", "ccc")
	req.Items = append(req.Items, nil)
	_, err := itemsOf(t, req, func(items runtime.BatchItems) (runtime.Response, error) {
		require.Equal(t, 4, items.Len())
		assert.Equal(t, []byte("a"), items.Key(0))
		assert.Equal(t, []byte("ccc"), items.Key(2))
		assert.Nil(t, items.Key(3), "a missing item has no key")
		assert.Equal(t, []bool{false, true, false, true}, []bool{items.Invalid(0), items.Invalid(1), items.Invalid(2), items.Invalid(3)})
		assert.False(t, items.Guarded(0), "a Get is never guarded")
		assert.Positive(t, items.Size(0))
		assert.Greater(t, items.Size(2), items.Size(0), "a longer key is a larger item")

		sub, ok := items.SubRequest([]int{2, 0}).(*zaris.MultiGetRequest)
		require.True(t, ok, "a sub-request is of the request's type")
		require.Len(t, sub.Items, 2)
		assert.Equal(t, "ccc", string(sub.Items[0].Key))
		assert.Equal(t, "a", string(sub.Items[1].Key))
		assert.Len(t, req.Items, 4, "the request itself is not changed")
		return nil, assert.AnError
	})
	require.ErrorIs(t, err, assert.AnError)
}

// A guarded item (a conditional Put) says so; an unconditional one does not.
func TestItems_GuardedIsTheItems(t *testing.T) {
	v := int64(3)
	req := &zaris.MultiPutRequest{Items: []*zaris.PutItem{{Key: []byte("a")}, {Key: []byte("b"), IfMatchVersion: &v}}}
	h := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		assert.False(t, call.Batch.Items.Guarded(0))
		assert.True(t, call.Batch.Items.Guarded(1))
		return nil, assert.AnError
	}
	_, err := zarisclient.New(h).MultiPut(context.Background(), req)
	require.ErrorIs(t, err, assert.AnError)
}

// Record keeps each item's result and returns their statuses; the merged response has
// them in request order, the status of an item no node answered (Unavailable) for the
// others, the invalid items' InvalidRequest, and the epoch it is given.
func TestItems_RecordAndMerge(t *testing.T) {
	res, err := itemsOf(t, getReq("a", "", "c", "d"), func(items runtime.BatchItems) (runtime.Response, error) {
		statuses, err := items.Record(&zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{
			{Status: zaris.KvStatus_Ok, Value: []byte("D")},
			{Status: zaris.KvStatus_Moved},
		}}, []int{3, 0})
		require.NoError(t, err)
		assert.Equal(t, []runtime.Status{runtime.Status(zaris.KvStatus_Ok), runtime.Status(zaris.KvStatus_Moved)}, statuses)
		return items.Response(9), nil
	})
	require.NoError(t, err)
	got := res.Response
	assert.Equal(t, zaris.KvStatus_Ok, got.Status)
	assert.EqualValues(t, 9, got.MapEpoch)
	require.Len(t, got.Results, 4)
	assert.Equal(t, zaris.KvStatus_Moved, got.Results[0].Status)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, got.Results[1].Status, "answered unsent")
	assert.Equal(t, zaris.KvStatus_Unavailable, got.Results[2].Status, "no node answered it")
	assert.Equal(t, zaris.KvStatus_Ok, got.Results[3].Status)
	assert.Equal(t, "D", string(got.Results[3].Value))
}

// A sub-response whose own status is not Ok gives each of its items that status, whatever
// results it carries.
func TestItems_RecordOfAWholeStatus(t *testing.T) {
	res, err := itemsOf(t, getReq("a", "b"), func(items runtime.BatchItems) (runtime.Response, error) {
		statuses, err := items.Record(&zaris.MultiGetResponse{Status: zaris.KvStatus_Migrating,
			Results: []*zaris.GetOutcome{{Status: zaris.KvStatus_Ok}}}, []int{1})
		require.NoError(t, err)
		assert.Equal(t, []runtime.Status{runtime.Status(zaris.KvStatus_Migrating)}, statuses)
		return items.Response(0), nil
	})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Unavailable, res.Response.Results[0].Status)
	assert.Equal(t, zaris.KvStatus_Migrating, res.Response.Results[1].Status)
}

// Record refuses a reply of another type, one with a result too few or too many, and one
// with a missing result, and keeps nothing of it.
func TestItems_RecordRefusesAReplyThatDoesNotMatch(t *testing.T) {
	ok := &zaris.GetOutcome{Status: zaris.KvStatus_Ok, Value: []byte("v")}
	for name, resp := range map[string]runtime.Response{
		"another operation's": &zaris.MultiPutResponse{Status: zaris.KvStatus_Ok},
		"a result too few":    &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{ok}},
		"a result too many":   &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{ok, ok, ok}},
		"a missing result":    &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: []*zaris.GetOutcome{ok, nil}},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := itemsOf(t, getReq("a", "b"), func(items runtime.BatchItems) (runtime.Response, error) {
				statuses, err := items.Record(resp, []int{0, 1})
				assert.ErrorIs(t, err, runtime.ErrNoResponse)
				assert.Nil(t, statuses)
				return items.Response(0), nil
			})
			require.NoError(t, err)
			for i, r := range res.Response.Results {
				assert.Equal(t, zaris.KvStatus_Unavailable, r.Status, "item %d kept a result of a refused reply", i)
			}
		})
	}
}

// Without a batch layer the request goes whole: an item answered with a status the
// application does not see gets a *StatusError, an answered one no error, and the call's
// error is nil while one item has an answer.
func TestRun_WithoutBatchLayerJudgesEachItem(t *testing.T) {
	h := func(context.Context, *runtime.Call) (runtime.Response, error) {
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 4, Results: []*zaris.GetOutcome{
			{Status: zaris.KvStatus_NotFound}, {Status: zaris.KvStatus_Moved},
		}}, nil
	}
	res, err := zarisclient.New(h).MultiGet(context.Background(), getReq("a", "b"))
	require.NoError(t, err)
	assert.NoError(t, res.Err(0))
	var se *runtime.StatusError
	require.ErrorAs(t, res.Err(1), &se)
	assert.Equal(t, "Moved", se.Name)
	assert.EqualValues(t, 4, res.Response.MapEpoch)
	assert.Equal(t, zaris.KvStatus_Moved, res.Response.Results[1].Status)
}

// A batch of no items, or of more than MaxItems, is refused before the stack sees it;
// one of exactly MaxItems goes.
func TestRun_RefusesEmptyAndOversizedBatches(t *testing.T) {
	calls := 0
	h := func(context.Context, *runtime.Call) (runtime.Response, error) { calls++; return nil, assert.AnError }
	c := zarisclient.New(h)
	for _, n := range []int{0, batch.MaxItems + 1} {
		req := &zaris.MultiGetRequest{}
		for range n {
			req.Items = append(req.Items, &zaris.GetItem{Key: []byte("k")})
		}
		res, err := c.MultiGet(context.Background(), req)
		assert.ErrorIs(t, err, runtime.ErrInvalidBatch, "%d items", n)
		assert.Nil(t, res)
	}
	assert.Zero(t, calls)

	req := &zaris.MultiGetRequest{}
	for range batch.MaxItems {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte("k")})
	}
	_, err := c.MultiGet(context.Background(), req)
	assert.ErrorIs(t, err, assert.AnError)
	assert.Equal(t, 1, calls)
}

// An operation whose status table has no multi-key roles cannot run a batch: Run says so
// instead of guessing which status means what.
func TestRun_NeedsTheStatusTablesRoles(t *testing.T) {
	op := *zarisclient.OpMultiGet
	op.Statuses = runtime.NewStatusTable("KvStatus", nil, op.Statuses.Statuses())
	spec := &batch.Spec[*zaris.MultiGetRequest, *zaris.GetItem, *zaris.MultiGetResponse, *zaris.GetOutcome]{
		Items: func(r *zaris.MultiGetRequest) []*zaris.GetItem { return r.Items },
	}
	h := func(context.Context, *runtime.Call) (runtime.Response, error) {
		t.Fatal("the stack was called")
		return nil, nil
	}
	res, err := batch.Run(context.Background(), h, &op, spec, getReq("a"))
	require.ErrorContains(t, err, "no multi-key roles")
	assert.Nil(t, res)
}
