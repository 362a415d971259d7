package main

import (
	"context"
	"errors"

	"github.com/clustron/zaris-go/gen/zaris"
)

func (n *faultyNode) MultiGet(context.Context, *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	return nil, errors.New("handler bug")
}

func (n *faultyNode) MultiPut(context.Context, *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	return nil, errors.New("handler bug")
}

func (n *faultyNode) MultiDelete(context.Context, *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	return nil, errors.New("handler bug")
}
