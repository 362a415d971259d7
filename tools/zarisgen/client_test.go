package main

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarismock"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/runtime"
)

// passThrough is the smallest stack: one attempt of the call on kv, nothing else.
func passThrough(kv zaris.ZarisKv) func(context.Context, *runtime.Call) (runtime.Response, error) {
	return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		return call.Op.Invoke(ctx, kv, call.Request)
	}
}

// Each typed method hands its request, unchanged, to the generated interface and returns the
// typed response; the call it builds describes the operation as the IDL annotates it.
func TestTypedClientReachesGeneratedInterface(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarismock.NewMockZarisKv(ctrl)
	var calls []*runtime.Call
	record := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		calls = append(calls, call)
		return passThrough(kv)(ctx, call)
	}
	c := zarisclient.New(record)
	ctx := context.Background()
	version := int64(7)

	getReq := &zaris.GetRequest{Key: []byte("g")}
	getResp := &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("v"), Version: 3, MapEpoch: 9}
	kv.EXPECT().Get(gomock.Any(), gomock.Eq(getReq)).Return(getResp, nil)
	putReq := &zaris.PutRequest{Key: []byte("p"), Value: []byte("v"), IfMatchVersion: &version}
	putResp := &zaris.PutResponse{Status: zaris.KvStatus_Conflict, Version: 8, MapEpoch: 9}
	kv.EXPECT().Put(gomock.Any(), gomock.Eq(putReq)).Return(putResp, nil)
	delReq := &zaris.DeleteRequest{Key: []byte("d")}
	delResp := &zaris.DeleteResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 9}
	kv.EXPECT().Delete(gomock.Any(), gomock.Eq(delReq)).Return(delResp, nil)
	incReq := &zaris.IncrementRequest{Key: []byte("i"), Delta: 2}
	incResp := &zaris.IncrementResponse{Status: zaris.KvStatus_Ok, Value: 5, Version: 4, MapEpoch: 9}
	kv.EXPECT().Increment(gomock.Any(), gomock.Eq(incReq)).Return(incResp, nil)

	gr, err := c.Get(ctx, getReq)
	require.NoError(t, err)
	assert.Same(t, getResp, gr)
	pr, err := c.Put(ctx, putReq)
	require.NoError(t, err)
	assert.Same(t, putResp, pr)
	dr, err := c.Delete(ctx, delReq)
	require.NoError(t, err)
	assert.Same(t, delResp, dr)
	ir, err := c.Increment(ctx, incReq)
	require.NoError(t, err)
	assert.Same(t, incResp, ir)

	require.Len(t, calls, 4)
	for i, want := range []struct {
		op        *runtime.Op
		req       any
		key       string
		kind      runtime.OpKind
		idem      bool
		guarded   bool
		guardList []string
	}{
		{zarisclient.OpGet, getReq, "g", runtime.Read, true, false, nil},
		{zarisclient.OpPut, putReq, "p", runtime.Write, true, true, []string{"ifMatchVersion", "ifAbsent"}},
		{zarisclient.OpDelete, delReq, "d", runtime.Write, true, false, []string{"ifMatchVersion"}},
		{zarisclient.OpIncrement, incReq, "i", runtime.Write, false, false, nil},
	} {
		call := calls[i]
		assert.Same(t, want.op, call.Op)
		assert.Same(t, want.req, call.Request, "the request reaches the stack unchanged")
		assert.Equal(t, want.key, string(call.Key))
		assert.Equal(t, want.kind, call.Op.Kind)
		assert.Equal(t, want.idem, call.Op.Idempotent)
		assert.Equal(t, want.guarded, call.Guarded)
		assert.Equal(t, want.guardList, call.Op.Guards)
		assert.Equal(t, "key", call.Op.RoutingField)
	}
	assert.Equal(t, []*runtime.Op{zarisclient.OpGet, zarisclient.OpPut, zarisclient.OpDelete, zarisclient.OpIncrement}, zarisclient.Ops)
}

// A Put guarded only by ifAbsent=false is not guarded; ifAbsent=true is.
func TestTypedClientGuards(t *testing.T) {
	var got []bool
	c := zarisclient.New(func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		got = append(got, call.Guarded)
		return &zaris.PutResponse{}, nil
	})
	no, yes := false, true
	for _, req := range []*zaris.PutRequest{{Key: []byte("k")}, {Key: []byte("k"), IfAbsent: &no}, {Key: []byte("k"), IfAbsent: &yes}} {
		_, err := c.Put(context.Background(), req)
		require.NoError(t, err)
	}
	assert.Equal(t, []bool{false, false, true}, got)
}

func TestTypedClientErrors(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarismock.NewMockZarisKv(ctrl)
	c := zarisclient.New(passThrough(kv))

	_, err := c.Put(context.Background(), nil)
	require.ErrorIs(t, err, runtime.ErrNilRequest)
	assert.Contains(t, err.Error(), "Put")

	kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, nil)
	resp, err := c.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
	require.ErrorIs(t, err, runtime.ErrNoResponse)
	assert.Nil(t, resp)

	appErr := thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom")
	kv.EXPECT().Delete(gomock.Any(), gomock.Any()).Return(nil, appErr)
	dr, err := c.Delete(context.Background(), &zaris.DeleteRequest{Key: []byte("k")})
	require.ErrorIs(t, err, appErr)
	assert.Nil(t, dr)
}

// memStore is a minimal in-memory ZarisKv for the wire test: enough to see every operation's
// request and response cross a real socket.
type memStore struct {
	zarisserver.UnimplementedZarisKv
	mu   sync.Mutex
	data map[string][]byte
	ver  map[string]int64
}

func (m *memStore) Get(_ context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[string(req.Key)]
	if !ok {
		return &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, nil
	}
	return &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: v, Version: m.ver[string(req.Key)], MapEpoch: 1}, nil
}

func (m *memStore) Put(_ context.Context, req *zaris.PutRequest) (*zaris.PutResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := string(req.Key)
	_, exists := m.data[k]
	if (req.IsSetIfMatchVersion() && req.GetIfMatchVersion() != m.ver[k]) || (req.GetIfAbsent() && exists) {
		return &zaris.PutResponse{Status: zaris.KvStatus_Conflict, Version: m.ver[k], MapEpoch: 1}, nil
	}
	m.data[k] = req.Value
	m.ver[k]++
	return &zaris.PutResponse{Status: zaris.KvStatus_Ok, Version: m.ver[k], MapEpoch: 1}, nil
}

func (m *memStore) Delete(_ context.Context, req *zaris.DeleteRequest) (*zaris.DeleteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := string(req.Key)
	if _, ok := m.data[k]; !ok {
		return &zaris.DeleteResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, nil
	}
	delete(m.data, k)
	return &zaris.DeleteResponse{Status: zaris.KvStatus_Ok, Version: m.ver[k], MapEpoch: 1}, nil
}

func (m *memStore) Increment(_ context.Context, req *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := string(req.Key)
	n, _ := strconv.ParseInt(string(m.data[k]), 10, 64)
	n += req.Delta
	m.data[k] = []byte(strconv.FormatInt(n, 10))
	m.ver[k]++
	return &zaris.IncrementResponse{Status: zaris.KvStatus_Ok, Value: n, Version: m.ver[k], MapEpoch: 1}, nil
}

func (m *memStore) GetClusterMap(context.Context) (*zaris.ClusterMap, error) {
	owner := int32(1)
	return &zaris.ClusterMap{Epoch: 1, SegmentCount: 1,
		Nodes:    []*zaris.NodeInfo{{ID: 1, Host: "127.0.0.1", Port: 1}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: &owner, Replicas: []int32{}}}}, nil
}

// Every operation makes a round trip over a real Thrift server on loopback, through the
// typed client: the 0.17 compiler's output and the pinned v0.25.0 library work together.
func TestTypedClientRoundTripOverThrift(t *testing.T) {
	cfg := &thrift.TConfiguration{ConnectTimeout: time.Second, SocketTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srvSock := thrift.NewTServerSocketFromAddrTimeout(ln.Addr(), 0)
	require.NoError(t, ln.Close())
	srv := thrift.NewTSimpleServer4(
		zaris.NewZarisKvProcessor(&memStore{data: map[string][]byte{}, ver: map[string]int64{}}),
		srvSock,
		thrift.NewTHeaderTransportFactoryConf(nil, cfg),
		thrift.NewTHeaderProtocolFactoryConf(cfg),
	)
	require.NoError(t, srv.Listen())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, srv.Stop())
		require.NoError(t, <-done)
	})

	sock := thrift.NewTSocketConf(srvSock.Addr().String(), cfg)
	trans := thrift.NewTFramedTransportConf(sock, cfg)
	require.NoError(t, trans.Open())
	t.Cleanup(func() { _ = trans.Close() })
	kv := zaris.NewZarisKvClientFactory(trans, thrift.NewTBinaryProtocolFactoryConf(cfg))
	c := zarisclient.New(passThrough(kv))
	ctx := context.Background()

	g, err := c.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, g.Status)

	p, err := c.Put(ctx, &zaris.PutRequest{Key: []byte("k"), Value: []byte("v1")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, p.Status)
	assert.Equal(t, int64(1), p.Version)
	assert.Equal(t, int64(1), p.MapEpoch)

	yes := true
	p, err = c.Put(ctx, &zaris.PutRequest{Key: []byte("k"), Value: []byte("v2"), IfAbsent: &yes})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Conflict, p.Status)
	assert.Equal(t, int64(1), p.Version)

	g, err = c.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, g.Status)
	assert.Equal(t, "v1", string(g.Value))

	d, err := c.Delete(ctx, &zaris.DeleteRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, d.Status)

	i, err := c.Increment(ctx, &zaris.IncrementRequest{Key: []byte("n"), Delta: 5})
	require.NoError(t, err)
	assert.Equal(t, int64(5), i.Value)
	i, err = c.Increment(ctx, &zaris.IncrementRequest{Key: []byte("n"), Delta: -2})
	require.NoError(t, err)
	assert.Equal(t, int64(3), i.Value)
	assert.Equal(t, int64(2), i.Version)

	m, err := kv.GetClusterMap(ctx)
	require.NoError(t, err)
	assert.Equal(t, int32(1), m.SegmentCount)
	assert.Equal(t, int32(1), m.Segments[0].GetOwner())
}

// A client made by New owns nothing: Close does nothing and it has no engine.
func TestNewClientHasNothingToClose(t *testing.T) {
	c := zarisclient.New(func(context.Context, *runtime.Call) (runtime.Response, error) { return nil, nil })
	assert.NoError(t, c.Close())
	assert.Nil(t, c.Engine())
}

// New refuses a nil handler at once, naming it, rather than leaving a client whose every
// call would panic on a nil function.
func TestNewRefusesANilHandler(t *testing.T) {
	assert.PanicsWithValue(t, "zarisclient: New needs a handler, got nil", func() { zarisclient.New(nil) })
}

// A refused batch (no items, or a nil request) returns a nil result and the error.
func TestRefusedBatchHasNoResult(t *testing.T) {
	c := zarisclient.New(func(context.Context, *runtime.Call) (runtime.Response, error) { return nil, nil })
	res, err := c.MultiGet(context.Background(), &zaris.MultiGetRequest{})
	assert.ErrorIs(t, err, runtime.ErrInvalidBatch)
	assert.Nil(t, res)
	res, err = c.MultiGet(context.Background(), nil)
	assert.ErrorIs(t, err, runtime.ErrNilRequest)
	assert.Nil(t, res)
}

// Dial returns a client on the default stack over its own engine: the engine holds the
// first map, calls go through the stack's per-client options, and Close closes the
// engine, after which a call fails with runtime.ErrClosed.
func TestDialBuildsTheDefaultStackAndCloseClosesTheEngine(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarismock.NewMockZarisKv(ctrl)
	m := &zaris.ClusterMap{Epoch: 1, SegmentCount: 1,
		Nodes:    []*zaris.NodeInfo{{ID: 1, Host: "127.0.0.1", Port: 7001}},
		Segments: []*zaris.SegmentInfo{{ID: 0, Owner: thrift.Int32Ptr(1)}}}
	kv.EXPECT().GetClusterMap(gomock.Any()).Return(m, nil)
	kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 1}, nil)
	dial := func(context.Context, string) (runtime.Conn, error) { return mockConn{kv}, nil }
	var seen []string
	audit := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			seen = append(seen, call.Op.Name)
			return next(ctx, call)
		}
	}
	c, err := zarisclient.Dial(context.Background(), runtime.WithEnv(nil), runtime.WithSeeds("127.0.0.1:7001"),
		runtime.WithDialer(dial), runtime.WithCallMiddleware(audit), runtime.WithDefaultMaxAttempts(2))
	require.NoError(t, err)
	require.NotNil(t, c.Engine())
	assert.Equal(t, int64(1), c.Engine().Map().Epoch)
	assert.Equal(t, 2, c.Engine().Config().Retry.MaxAttempts)

	_, err = c.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Equal(t, []string{"Get"}, seen)

	require.NoError(t, c.Close())
	_, err = c.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
	assert.ErrorIs(t, err, runtime.ErrClosed)
}

// mockConn is a runtime.Conn over a generated-interface mock.
type mockConn struct{ kv zaris.ZarisKv }

func (c mockConn) Client() any  { return c.kv }
func (c mockConn) Close() error { return nil }
