package main

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
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
	"github.com/clustron/zaris-go/gen/zarisclientmock"
	"github.com/clustron/zaris-go/gen/zarismock"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/batch"
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
	incReq := &zaris.IncrementRequest{Key: []byte("i"), Delta: 2, Token: &zaris.RequestToken{Client: 11, Sequence: 12}}
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

// B8: the typed client gives each call of a tokened operation a token of its own (one
// random client id, a new sequence per call) on a copy of the request, leaving the caller's
// request as it was, so a request reused for a second call is a new call; a request that
// carries a token keeps it.
func TestB8_TypedClientSetsOneTokenPerCall(t *testing.T) {
	var calls []*runtime.Call
	c := zarisclient.New(func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		calls = append(calls, call)
		return &zaris.IncrementResponse{}, nil
	})
	ctx := context.Background()
	req := &zaris.IncrementRequest{Key: []byte("k"), Delta: 1}
	for range 2 {
		_, err := c.Increment(ctx, req)
		require.NoError(t, err)
	}
	own := &zaris.IncrementRequest{Key: []byte("k"), Delta: 1, Token: &zaris.RequestToken{Client: 5, Sequence: 6}}
	_, err := c.Increment(ctx, own)
	require.NoError(t, err)
	other := zarisclient.New(func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		calls = append(calls, call)
		return &zaris.IncrementResponse{}, nil
	})
	_, err = other.Increment(ctx, req)
	require.NoError(t, err)

	assert.Nil(t, req.Token, "the caller's request is not modified")
	require.Len(t, calls, 4)
	first, second := calls[0].Token, calls[1].Token
	assert.NotZero(t, first.Client)
	assert.Equal(t, first.Client, second.Client, "one client id per client")
	assert.Equal(t, first.Sequence+1, second.Sequence, "a new sequence per call")
	for _, call := range calls[:2] {
		sent := call.Request.(*zaris.IncrementRequest)
		require.NotNil(t, sent.Token)
		assert.Equal(t, runtime.Token{Client: sent.Token.Client, Sequence: sent.Token.Sequence}, call.Token, "the call's token is the one the request carries")
		assert.NotSame(t, req, sent)
	}
	assert.Same(t, own, calls[2].Request, "a request with its own token goes unchanged")
	assert.Equal(t, runtime.Token{Client: 5, Sequence: 6}, calls[2].Token)
	assert.NotEqual(t, first.Client, calls[3].Token.Client, "another client, another id")
	assert.Equal(t, "token", zarisclient.OpIncrement.TokenField)
	assert.Empty(t, zarisclient.OpPut.TokenField, "an idempotent operation carries none")
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

// A typed method never returns a nil response with a nil error. Over a custom stack that
// answers with a response of another operation's type, each single-key method returns an
// error wrapping runtime.ErrNoResponse that names the operation, the type it got and the
// type it wanted (and wraps the stack's own error when there is one); a stack that returns
// neither a response nor an error (a nil interface or a nil typed pointer) gets an error too.
// A right-typed response with an error (a *runtime.CallError carrying the last response)
// still comes back as both. A multi-key method reports both mistakes too.
func TestTypedClientRefusesAWrongResponse(t *testing.T) {
	ctx := context.Background()
	// Each method's call, a response of its own type, its type's name, a nil pointer of it,
	// and a response of another type with that type's name.
	get := func(c *zarisclient.Client) (any, error) { return c.Get(ctx, &zaris.GetRequest{Key: []byte("k")}) }
	put := func(c *zarisclient.Client) (any, error) { return c.Put(ctx, &zaris.PutRequest{Key: []byte("k")}) }
	del := func(c *zarisclient.Client) (any, error) { return c.Delete(ctx, &zaris.DeleteRequest{Key: []byte("k")}) }
	inc := func(c *zarisclient.Client) (any, error) {
		return c.Increment(ctx, &zaris.IncrementRequest{Key: []byte("k")})
	}
	methods := []struct {
		name      string
		call      func(*zarisclient.Client) (any, error)
		right     runtime.Response
		typeName  string
		typedNil  runtime.Response
		otherName string
		other     runtime.Response
	}{
		{"Get", get, &zaris.GetResponse{}, "*zaris.GetResponse", (*zaris.GetResponse)(nil), "*zaris.PutResponse", &zaris.PutResponse{}},
		{"Put", put, &zaris.PutResponse{}, "*zaris.PutResponse", (*zaris.PutResponse)(nil), "*zaris.GetResponse", &zaris.GetResponse{}},
		{"Delete", del, &zaris.DeleteResponse{}, "*zaris.DeleteResponse", (*zaris.DeleteResponse)(nil), "*zaris.IncrementResponse", &zaris.IncrementResponse{}},
		{"Increment", inc, &zaris.IncrementResponse{}, "*zaris.IncrementResponse", (*zaris.IncrementResponse)(nil), "*zaris.MultiGetResponse", &zaris.MultiGetResponse{}},
	}
	stack := func(resp runtime.Response, err error) runtime.Handler {
		return func(context.Context, *runtime.Call) (runtime.Response, error) { return resp, err }
	}
	isNil := func(v any) bool { return v == nil || reflect.ValueOf(v).IsNil() }
	stackErr := errors.New("the stack's own error")
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			resp, err := m.call(zarisclient.New(stack(m.other, nil)))
			require.ErrorIs(t, err, runtime.ErrNoResponse)
			assert.True(t, isNil(resp), "no response with the error")
			assert.Equal(t, "zaris: "+m.name+": zaris: no response in reply: the stack returned a "+m.otherName+", want "+m.typeName, err.Error())

			resp, err = m.call(zarisclient.New(stack(m.other, stackErr)))
			require.ErrorIs(t, err, runtime.ErrNoResponse)
			require.ErrorIs(t, err, stackErr, "the stack's error is kept")
			assert.True(t, isNil(resp))
			assert.Contains(t, err.Error(), "the stack returned a "+m.otherName+", want "+m.typeName+", and the error: the stack's own error")

			for _, neither := range []runtime.Response{nil, m.typedNil} {
				resp, err = m.call(zarisclient.New(stack(neither, nil)))
				require.ErrorIs(t, err, runtime.ErrNoResponse, "a stack returning %#v and no error", neither)
				assert.True(t, isNil(resp))
				assert.Equal(t, "zaris: "+m.name+": zaris: no response in reply: the stack returned neither a response nor an error", err.Error())
			}

			callErr := &runtime.CallError{Op: m.name, Bound: runtime.BoundAttempts, Err: errors.New("churn")}
			resp, err = m.call(zarisclient.New(stack(m.right, callErr)))
			assert.Same(t, callErr, err, "the stack's error comes back unchanged")
			assert.Same(t, m.right, resp, "with the last response")
		})
	}
	// A multi-key method gets the same from batch.Run: an error wrapping
	// runtime.ErrNoResponse, for the batch and for each item.
	for _, resp := range []runtime.Response{&zaris.GetResponse{}, nil} {
		res, err := zarisclient.New(stack(resp, nil)).MultiGet(ctx, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("k")}}})
		require.ErrorIs(t, err, runtime.ErrNoResponse, "a stack returning %#v", resp)
		require.NotNil(t, res)
		assert.ErrorIs(t, res.Err(0), runtime.ErrNoResponse)
	}
}

// KV holds every typed method of Client, one per data operation and nothing else (Close and
// Engine are the owner's), with Client's signatures; *Client and the generated mock
// (gen/zarisclientmock, made by make generate's mockgen) both implement it.
func TestKVHoldsEveryTypedMethod(t *testing.T) {
	var _ zarisclient.KV = (*zarisclient.Client)(nil)
	var _ zarisclient.KV = (*zarisclientmock.MockKV)(nil)
	kv := reflect.TypeFor[zarisclient.KV]()
	client := reflect.TypeFor[*zarisclient.Client]()
	var ops, methods []string
	for _, op := range slices.Concat(zarisclient.Ops, zarisclient.BatchOps) {
		ops = append(ops, op.Name)
	}
	for i := range kv.NumMethod() {
		m := kv.Method(i)
		methods = append(methods, m.Name)
		cm, ok := client.MethodByName(m.Name)
		require.True(t, ok, "Client has no method %s", m.Name)
		var in []reflect.Type
		for j := 1; j < cm.Type.NumIn(); j++ { // without the receiver
			in = append(in, cm.Type.In(j))
		}
		want := reflect.FuncOf(in, []reflect.Type{cm.Type.Out(0), cm.Type.Out(1)}, cm.Type.IsVariadic())
		assert.Equal(t, want, m.Type, "KV.%s and Client.%s differ", m.Name, m.Name)
	}
	slices.Sort(ops)
	assert.Equal(t, ops, methods, "KV's methods are the data operations")
	var rest []string
	for i := range client.NumMethod() {
		if name := client.Method(i).Name; !slices.Contains(methods, name) {
			rest = append(rest, name)
		}
	}
	assert.Equal(t, []string{"Close", "Engine"}, rest, "Client's methods besides KV's")
	assert.Equal(t, reflect.TypeFor[*batch.Result[*zaris.MultiGetResponse]](), reflect.TypeFor[*zarisclient.MultiGetResult](),
		"a multi-key result is an alias of batch.Result")
}

// The generated mock of KV records and answers calls as gomock does, multi-key ones included.
func TestMockKVAnswersAsExpected(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarisclientmock.NewMockKV(ctrl)
	ctx := context.Background()
	get := &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: []byte("v")}
	kv.EXPECT().Get(gomock.Any(), gomock.Eq(&zaris.GetRequest{Key: []byte("k")})).Return(get, nil)
	multi := &zarisclient.MultiGetResult{Response: &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}, Errs: []error{nil}}
	kv.EXPECT().MultiGet(gomock.Any(), gomock.Any(), gomock.Any()).Return(multi, nil)
	var svc zarisclient.KV = kv
	got, err := svc.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	require.NoError(t, err)
	assert.Same(t, get, got)
	res, err := svc.MultiGet(ctx, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("k")}}}, runtime.WithMaxAttempts(2))
	require.NoError(t, err)
	assert.Same(t, multi, res)
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
