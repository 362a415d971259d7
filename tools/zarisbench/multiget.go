package main

import (
	"context"

	"github.com/clustron/zaris-go/gen/zaris"
)

// The recorder notes single-key answers only; multi-key calls pass through it.

func (k *recKv) MultiGet(ctx context.Context, req *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	return k.inner.MultiGet(ctx, req)
}

func (k *recKv) MultiPut(ctx context.Context, req *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	return k.inner.MultiPut(ctx, req)
}

func (k *recKv) MultiDelete(ctx context.Context, req *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	return k.inner.MultiDelete(ctx, req)
}
