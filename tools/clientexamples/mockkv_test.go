package clientexamples_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarisclientmock"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// names is a service of your own that keeps users' display names in Zaris. It takes a
// zarisclient.KV, the interface of the client's typed methods, rather than a
// *zarisclient.Client: in production it gets the client zarisclient.Dial returns, in its
// unit tests a mock (zarisclientmock.MockKV, which make generate writes with mockgen).
type names struct{ kv zarisclient.KV }

// Rename changes the name of user from `from` to `to` if it is still `from`: it reads the
// name and writes the new one only at the version it read (IfMatchVersion). It reports
// whether the rename applied; a name that has changed, a user that does not exist or a write
// that lost a race is false with a nil error.
func (n names) Rename(ctx context.Context, user, from, to string) (bool, error) {
	key := []byte("name:" + user)
	cur, err := n.kv.Get(ctx, &zaris.GetRequest{Key: key})
	if err != nil {
		return false, fmt.Errorf("rename %s: %w", user, err)
	}
	if cur.Status != zaris.KvStatus_Ok || string(cur.Value) != from {
		return false, nil
	}
	put, err := n.kv.Put(ctx, &zaris.PutRequest{Key: key, Value: []byte(to), IfMatchVersion: thrift.Int64Ptr(cur.Version)})
	if err != nil {
		return false, fmt.Errorf("rename %s: %w", user, err)
	}
	return put.Status == zaris.KvStatus_Ok, nil
}

// The service's own unit test, as its team would write it: no cluster, a generated mock of
// zarisclient.KV that expects the calls the service should make and answers them, one case
// per outcome the service must handle (an answer of each status, and a call that got none).
func TestRenameWithAMockKV(t *testing.T) {
	ctx := context.Background()
	key := []byte("name:42")
	get := func(kv *zarisclientmock.MockKV) *gomock.Call {
		return kv.EXPECT().Get(gomock.Any(), &zaris.GetRequest{Key: key})
	}
	casPut := func(kv *zarisclientmock.MockKV) *gomock.Call {
		// gomock compares the request deeply: the name, and the version it must match.
		return kv.EXPECT().Put(gomock.Any(), &zaris.PutRequest{Key: key, Value: []byte("Ada Lovelace"), IfMatchVersion: thrift.Int64Ptr(7)})
	}
	unanswered := &runtime.CallError{Op: "Get", Bound: runtime.BoundAttempts, MaxAttempts: 3, Err: errors.New("no owner")}
	for _, tc := range []struct {
		name    string
		expect  func(kv *zarisclientmock.MockKV)
		applied bool
		err     error
	}{
		{"applies at the version it read", func(kv *zarisclientmock.MockKV) {
			gomock.InOrder(
				get(kv).Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("Ada"), Version: 7}, nil),
				casPut(kv).Return(&zaris.PutResponse{Status: zaris.KvStatus_Ok, Version: 8}, nil),
			)
		}, true, nil},
		{"loses a race to another writer", func(kv *zarisclientmock.MockKV) {
			gomock.InOrder(
				get(kv).Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("Ada"), Version: 7}, nil),
				casPut(kv).Return(&zaris.PutResponse{Status: zaris.KvStatus_Conflict, Version: 9}, nil),
			)
		}, false, nil},
		{"leaves a name that has changed", func(kv *zarisclientmock.MockKV) {
			// No Put is expected: the mock fails the test if the service writes.
			get(kv).Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("Grace"), Version: 7}, nil)
		}, false, nil},
		{"leaves a user that does not exist", func(kv *zarisclientmock.MockKV) {
			get(kv).Return(&zaris.GetResponse{Status: zaris.KvStatus_NotFound}, nil)
		}, false, nil},
		{"returns the client's error", func(kv *zarisclientmock.MockKV) {
			get(kv).Return(nil, unanswered)
		}, false, unanswered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := zarisclientmock.NewMockKV(gomock.NewController(t))
			tc.expect(kv)
			applied, err := names{kv: kv}.Rename(ctx, "42", "Ada", "Ada Lovelace")
			assert.Equal(t, tc.applied, applied)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			var callErr *runtime.CallError
			require.ErrorAs(t, err, &callErr, "the service wraps the client's error")
			assert.Same(t, tc.err, callErr)
		})
	}
}

// The same service on the real client: production code hands it what zarisclient.Dial
// returns, which is a zarisclient.KV.
func TestRenameOnTheClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(cluster.Seeds()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = kv.Close() })
	_, err = kv.Put(ctx, &zaris.PutRequest{Key: []byte("name:42"), Value: []byte("Ada")})
	require.NoError(t, err)

	svc := names{kv: kv}
	applied, err := svc.Rename(ctx, "42", "Ada", "Ada Lovelace")
	require.NoError(t, err)
	assert.True(t, applied)
	applied, err = svc.Rename(ctx, "42", "Ada", "Grace")
	require.NoError(t, err)
	assert.False(t, applied, "the name is no longer Ada")
	get, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("name:42")})
	require.NoError(t, err)
	assert.Equal(t, "Ada Lovelace", string(get.Value))
}
