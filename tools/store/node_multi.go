package store

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/batch"
)

// The multi-key operations answer each item exactly as the single-key operation would
// (same validation, status order and replication), one item after another in request order,
// so items of one key apply in the order given. A batch is not atomic: each item stands on
// its own. A batch with no items or more than batch.MaxItems answers InvalidRequest
// with no results. If one write's outcome is in doubt the node answers nothing, as for a
// single write: the items before it may have been applied.

// validBatch reports whether a batch of n items may be served.
func validBatch(n int) bool { return n > 0 && n <= batch.MaxItems }

// MultiGet reads each item as Get does. The outcomes share one backing array.
func (h *kvHandler) MultiGet(_ context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	if req == nil {
		req = &zaris.MultiGetRequest{} // a call without its request: nothing is valid
	}
	resp := &zaris.MultiGetResponse{MapEpoch: h.n.Epoch(), Results: []*zaris.GetOutcome{}}
	if !validBatch(len(req.GetItems())) {
		resp.Status = zaris.KvStatus_InvalidRequest
		return resp, nil
	}
	outs := make([]zaris.GetOutcome, len(req.Items))
	resp.Results = make([]*zaris.GetOutcome, len(req.Items))
	for i, it := range req.Items {
		r := h.n.read(it.GetKey())
		resp.MapEpoch = max(resp.MapEpoch, r.epoch)
		outs[i] = zaris.GetOutcome{Status: r.status, Value: r.value, Version: r.version}
		resp.Results[i] = &outs[i]
	}
	return resp, nil
}

// MultiPut writes each item as Put does.
func (h *kvHandler) MultiPut(ctx context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	if req == nil {
		req = &zaris.MultiPutRequest{} // a call without its request: nothing is valid
	}
	resp := &zaris.MultiPutResponse{MapEpoch: h.n.Epoch(), Results: []*zaris.PutOutcome{}}
	if !validBatch(len(req.GetItems())) {
		resp.Status = zaris.KvStatus_InvalidRequest
		return resp, nil
	}
	for _, it := range req.Items {
		if it == nil {
			it = &zaris.PutItem{}
		}
		r, err := h.Put(ctx, &zaris.PutRequest{Key: it.Key, Value: it.Value, IfMatchVersion: it.IfMatchVersion, IfAbsent: it.IfAbsent})
		if err != nil {
			return nil, err
		}
		resp.MapEpoch = max(resp.MapEpoch, r.MapEpoch)
		resp.Results = append(resp.Results, &zaris.PutOutcome{Status: r.Status, Version: r.Version})
	}
	return resp, nil
}

// MultiDelete deletes each item as Delete does.
func (h *kvHandler) MultiDelete(ctx context.Context, req *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	if req == nil {
		req = &zaris.MultiDeleteRequest{} // a call without its request: nothing is valid
	}
	resp := &zaris.MultiDeleteResponse{MapEpoch: h.n.Epoch(), Results: []*zaris.DeleteOutcome{}}
	if !validBatch(len(req.GetItems())) {
		resp.Status = zaris.KvStatus_InvalidRequest
		return resp, nil
	}
	for _, it := range req.Items {
		if it == nil {
			it = &zaris.DeleteItem{}
		}
		r, err := h.Delete(ctx, &zaris.DeleteRequest{Key: it.Key, IfMatchVersion: it.IfMatchVersion})
		if err != nil {
			return nil, err
		}
		resp.MapEpoch = max(resp.MapEpoch, r.MapEpoch)
		resp.Results = append(resp.Results, &zaris.DeleteOutcome{Status: r.Status, Version: r.Version})
	}
	return resp, nil
}
