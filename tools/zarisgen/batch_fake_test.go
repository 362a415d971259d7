package main

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
)

// memStore serves the multi-key operations item by item through its single-key ones.

func (m *memStore) MultiGet(ctx context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	resp := &zaris.MultiGetResponse{MapEpoch: 1, Results: []*zaris.GetOutcome{}}
	for _, it := range req.Items {
		r, _ := m.Get(ctx, &zaris.GetRequest{Key: it.Key})
		resp.Results = append(resp.Results, &zaris.GetOutcome{Status: r.Status, Value: r.Value, Version: r.Version})
	}
	return resp, nil
}

func (m *memStore) MultiPut(ctx context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	resp := &zaris.MultiPutResponse{MapEpoch: 1, Results: []*zaris.PutOutcome{}}
	for _, it := range req.Items {
		r, _ := m.Put(ctx, &zaris.PutRequest{Key: it.Key, Value: it.Value, IfMatchVersion: it.IfMatchVersion, IfAbsent: it.IfAbsent})
		resp.Results = append(resp.Results, &zaris.PutOutcome{Status: r.Status, Version: r.Version})
	}
	return resp, nil
}

func (m *memStore) MultiDelete(ctx context.Context, req *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	resp := &zaris.MultiDeleteResponse{MapEpoch: 1, Results: []*zaris.DeleteOutcome{}}
	for _, it := range req.Items {
		r, _ := m.Delete(ctx, &zaris.DeleteRequest{Key: it.Key, IfMatchVersion: it.IfMatchVersion})
		resp.Results = append(resp.Results, &zaris.DeleteOutcome{Status: r.Status, Version: r.Version})
	}
	return resp, nil
}
