package middleware_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// ownerByLastByte routes a key to node 1, 2 or 3 by its last byte.
type ownerByLastByte struct{}

var ownerAddrs = []string{"node1:7001", "node2:7002", "node3:7003"}

func (ownerByLastByte) Route(key []byte) (runtime.Route, error) {
	n := int(key[len(key)-1] % 3)
	return runtime.Route{Node: int32(n + 1), Addr: ownerAddrs[n]}, nil
}

// The batch layer's work per item is bookkeeping in slices sized once per call: a batch of
// 300 items over 3 owners allocates about as many objects in it as one of 9 (the margin
// allows slices that grow with the batch; one object per item would exceed it).
func TestBatches_AllocatesPerOwnerNotPerItem(t *testing.T) {
	outcomes := make([]*zaris.GetOutcome, 300)
	for i := range outcomes {
		outcomes[i] = &zaris.GetOutcome{Status: zaris.KvStatus_Ok}
	}
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		a := call.StartAttempt()
		a.Node, a.Sent, a.Answered, a.Status = call.Target.Node, true, true, zaris.KvStatus_Ok
		n := len(call.Request.(*zaris.MultiGetRequest).Items)
		return &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok, Results: outcomes[:n]}, nil
	}
	batches := middleware.Batches(runtime.DefaultRetryPolicy, mwt.NewClock(), nil, ownerByLastByte{}, nil)
	client := zarisclient.New(batches(transport))
	batch := func(n int) *zaris.MultiGetRequest {
		req := &zaris.MultiGetRequest{}
		for i := range n {
			req.Items = append(req.Items, &zaris.GetItem{Key: fmt.Appendf(nil, "k%d", i)})
		}
		return req
	}
	allocs := func(req *zaris.MultiGetRequest) float64 {
		return testing.AllocsPerRun(20, func() {
			r, err := client.MultiGet(context.Background(), req)
			require.NoError(t, err)
			require.NoError(t, r.Err(len(req.Items)-1))
		})
	}
	small, big := allocs(batch(9)), allocs(batch(300))
	assert.Less(t, big, small+20, "objects for 300 items, against %v for 9", small)
}
