package runtime

import (
	"context"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
)

// testKV does not serve the multi-key operations; the batch engine is tested in middleware
// and end to end against the reference store.

func (h *testKV) MultiGet(context.Context, *zaris.MultiGetRequest) (*zaris.MultiGetResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "MultiGet is not served here")
}

func (h *testKV) MultiPut(context.Context, *zaris.MultiPutRequest) (*zaris.MultiPutResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "MultiPut is not served here")
}

func (h *testKV) MultiDelete(context.Context, *zaris.MultiDeleteRequest) (*zaris.MultiDeleteResponse, error) {
	return nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "MultiDelete is not served here")
}
