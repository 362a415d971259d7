package batch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
)

// Result.Err of an index outside the batch is nil, not a panic.
func TestResult_ErrOutsideTheBatchIsNil(t *testing.T) {
	r := &batch.Result[*zaris.MultiGetResponse]{Errs: []error{assert.AnError, assert.AnError}}
	assert.Equal(t, assert.AnError, r.Err(1))
	assert.NoError(t, r.Err(2))
	assert.NoError(t, r.Err(-1))
}

// An Error's message names the first item error there is, skipping answered items.
func TestError_NamesTheFirstItemError(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	err := &batch.Error{Op: "MultiGet", Errs: []error{nil, first, second}}
	assert.Equal(t, "zaris: MultiGet: none of 3 items got an answer: first", err.Error())
	assert.Equal(t, "zaris: MultiGet: none of 0 items got an answer", (&batch.Error{Op: "MultiGet"}).Error())
}

// An Error unwraps to its items' errors, skipping the answered items' nils, so errors.Is
// and errors.As find what each item met.
func TestError_UnwrapsToTheItemsErrors(t *testing.T) {
	first, second := errors.New("first"), &runtime.StatusError{Name: "Moved"}
	err := &batch.Error{Op: "MultiGet", Errs: []error{nil, first, nil, second}}
	assert.Equal(t, []error{first, second}, err.Unwrap())
	assert.ErrorIs(t, err, first)
	var se *runtime.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "Moved", se.Name)
	assert.Empty(t, (&batch.Error{Errs: []error{nil}}).Unwrap())
}

// Without a batch layer, Run reports the stack's error as it is, and a reply that
// does not match the request (ErrNoResponse) when the stack reported none.
func TestRun_WithoutBatchLayerKeepsTheStacksError(t *testing.T) {
	reply := func(results int, err error) func(context.Context, *runtime.Call) (runtime.Response, error) {
		return func(context.Context, *runtime.Call) (runtime.Response, error) {
			resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
			for range results {
				resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Ok})
			}
			return resp, err
		}
	}
	res, err := zarisclient.New(reply(1, nil)).MultiGet(context.Background(), getReq("a", "b"))
	assert.ErrorIs(t, err, runtime.ErrNoResponse, "one result for two items")
	require.NotNil(t, res)
	for i, r := range res.Response.Results {
		assert.Equal(t, zaris.KvStatus_Unavailable, r.Status, "item %d has a result of a reply that does not match", i)
	}

	_, err = zarisclient.New(reply(2, assert.AnError)).MultiGet(context.Background(), getReq("a", "b"))
	assert.ErrorIs(t, err, assert.AnError, "a well-formed reply does not hide the stack's error")
}

// Without a batch layer, a stack that returns neither a reply nor an error leaves every
// item without an answer: each item's error, and the call's, is ErrNoResponse, never nil.
func TestRun_NoReplyAndNoErrorIsNoResponse(t *testing.T) {
	nothing := func(context.Context, *runtime.Call) (runtime.Response, error) { return nil, nil }
	res, err := zarisclient.New(nothing).MultiGet(context.Background(), getReq("a", "b"))
	require.ErrorIs(t, err, runtime.ErrNoResponse)
	require.NotNil(t, res)
	require.Len(t, res.Errs, 2)
	for i := range 2 {
		assert.ErrorIs(t, res.Err(i), runtime.ErrNoResponse, "item %d", i)
	}
}

// The typed client's batch items know their sizes (BatchItems.Size), for the batch layer's
// cut by BatchMaxBytes.
func TestRun_ItemsKnowTheirSizes(t *testing.T) {
	var sizes []int
	h := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		sizes = append(sizes, call.Batch.Items.Size(0), call.Batch.Items.Size(1))
		return nil, assert.AnError
	}
	_, err := zarisclient.New(h).MultiGet(context.Background(), getReq("a", "a longer key"))
	require.ErrorIs(t, err, assert.AnError)
	require.Len(t, sizes, 2)
	assert.Positive(t, sizes[0])
	assert.Greater(t, sizes[1], sizes[0], "a longer key makes a larger item")
}

// getReq is a MultiGet of keys.
func getReq(keys ...string) *zaris.MultiGetRequest {
	req := &zaris.MultiGetRequest{}
	for _, k := range keys {
		req.Items = append(req.Items, &zaris.GetItem{Key: []byte(k)})
	}
	return req
}
