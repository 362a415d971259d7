package runtime

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
	"github.com/clustron/zaris-go/gen/zarismock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// testStatuses is the class table the generated client has (gen/zarisclient.Statuses),
// which runtime's own tests cannot import.
var testStatuses = NewStatusTable("KvStatus", &StatusRoles{
	Ok: int64(zaris.KvStatus_Ok), Invalid: int64(zaris.KvStatus_InvalidRequest), Unanswered: int64(zaris.KvStatus_Unavailable),
}, []StatusInfo{
	{Value: int64(zaris.KvStatus_Ok), Name: "Ok", Class: Answer},
	{Value: int64(zaris.KvStatus_NotFound), Name: "NotFound", Class: Answer},
	{Value: int64(zaris.KvStatus_Conflict), Name: "Conflict", Class: Answer},
	{Value: int64(zaris.KvStatus_Moved), Name: "Moved", Class: RefreshRetry},
	{Value: int64(zaris.KvStatus_OwnershipChanging), Name: "OwnershipChanging", Class: RefreshRetry},
	{Value: int64(zaris.KvStatus_ReplicaWriteRejected), Name: "ReplicaWriteRejected", Class: RefreshRetry},
	{Value: int64(zaris.KvStatus_Migrating), Name: "Migrating", Class: Retry, SlowFactor: 8},
	{Value: int64(zaris.KvStatus_Unavailable), Name: "Unavailable", Class: Retry},
	{Value: int64(zaris.KvStatus_InvalidRequest), Name: "InvalidRequest", Class: Answer},
})

// testService is a Service like the generated one, for tests.
var testService = &Service{
	Name:      "ZarisKv",
	NewClient: func(c thrift.TClient) any { return zaris.NewZarisKvClient(c) },
	FetchMap: func(ctx context.Context, client any) (*clustermap.Map, error) {
		m, err := client.(zaris.ZarisKv).GetClusterMap(ctx)
		if err != nil || m == nil {
			return nil, err
		}
		return fromIDL(m), nil
	},
}

// opGet and opPut are Ops like the generated ones, for tests.
var (
	opGet = &Op{Name: "Get", Kind: Read, Idempotent: true, RoutingField: "key", Statuses: testStatuses, Status: statusOf,
		Invoke: func(ctx context.Context, client any, req any) (Response, error) {
			kv := client.(zaris.ZarisKv)
			resp, err := kv.Get(ctx, req.(*zaris.GetRequest))
			if err != nil {
				return nil, err
			}
			if resp == nil {
				return nil, ErrNoResponse
			}
			return resp, nil
		}}
	opPut = &Op{Name: "Put", Kind: Write, Idempotent: true, RoutingField: "key", Guards: []string{"ifMatchVersion", "ifAbsent"}, Statuses: testStatuses, Status: statusOf,
		Invoke: func(ctx context.Context, client any, req any) (Response, error) {
			kv := client.(zaris.ZarisKv)
			resp, err := kv.Put(ctx, req.(*zaris.PutRequest))
			if err != nil {
				return nil, err
			}
			return resp, nil
		}}
)

func getCall(key string) *Call {
	return NewCall(opGet, []byte(key), &zaris.GetRequest{Key: []byte(key)}, false)
}

// mockEngine is an Engine over fake connections whose clients are per-node gomock mocks:
// node i+1 listens at 127.0.0.1:700(i+1); the seed is node 1.
type mockEngine struct {
	*Engine
	clock  *fakeClock
	dialer *fakeDialer
	nodes  map[string]*zarismock.MockZarisKv
}

// newMockEngine dials a cluster whose bootstrap map is boot (node 1 answers it once).
func newMockEngine(t *testing.T, boot *zaris.ClusterMap, opts ...Option) *mockEngine {
	t.Helper()
	ctrl := gomock.NewController(t)
	mc := &mockEngine{clock: newFakeClock(), nodes: map[string]*zarismock.MockZarisKv{}}
	for _, n := range boot.Nodes {
		mc.nodes[fmt.Sprintf("%s:%d", n.Host, n.Port)] = zarismock.NewMockZarisKv(ctrl)
	}
	mc.dialer = &fakeDialer{kv: func(addr string) zaris.ZarisKv {
		if kv, ok := mc.nodes[addr]; ok {
			return kv
		}
		return nil
	}, fail: func(addr string) error {
		if _, ok := mc.nodes[addr]; !ok {
			return fmt.Errorf("dial tcp %s: connection refused", addr)
		}
		return nil
	}}
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(boot, nil)
	all := append([]Option{WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:7001"), WithClock(mc.clock), WithDialer(mc.dialer.dial)}, opts...)
	c, err := Dial(context.Background(), all...)
	require.NoError(t, err)
	mc.Engine = c
	t.Cleanup(func() { c.Close() })
	return mc
}

func (mc *mockEngine) node(id int) *zarismock.MockZarisKv {
	return mc.nodes[fmt.Sprintf("127.0.0.1:%d", 7000+id)]
}

// ownerOf returns the node id owning key under the current map.
func (mc *mockEngine) ownerOf(t *testing.T, key string) int {
	r, err := mc.Route([]byte(key))
	require.NoError(t, err)
	return int(r.Node)
}

func TestInvokeRecordsAnAnswer(t *testing.T) {
	mc := newMockEngine(t, testMap(4, 16, 2))
	key := "user:1"
	owner := mc.ownerOf(t, key)
	mc.node(owner).EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, req *zaris.GetRequest) (*zaris.GetResponse, error) {
		mc.clock.Advance(7 * time.Millisecond)
		return &zaris.GetResponse{Status: zaris.KvStatus_Moved, MapEpoch: 5}, nil
	})
	call := getCall(key)
	resp, err := mc.Invoke(context.Background(), call)
	require.NoError(t, err, "a response is returned whatever its status")
	assert.Equal(t, zaris.KvStatus_Moved, kvStatus(resp))
	a := call.Attempts[0]
	assert.Equal(t, int32(owner), a.Node)
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", 7000+owner), a.Addr)
	assert.Equal(t, int64(4), a.MapEpoch)
	assert.True(t, a.Answered)
	assert.True(t, a.Sent)
	assert.Equal(t, Status(zaris.KvStatus_Moved), a.Status)
	assert.Equal(t, int64(5), a.AnswerEpoch)
	assert.Equal(t, 7*time.Millisecond, a.Duration)
	assert.NoError(t, a.Err)
	assert.Equal(t, Unclassified, a.Class, "the transport does not classify")

	// The connection went back to the pool and is reused.
	mc.node(owner).EXPECT().Get(gomock.Any(), gomock.Any()).Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 4}, nil)
	_, err = mc.Invoke(context.Background(), getCall(key))
	require.NoError(t, err)
	assert.Equal(t, int32(1), mc.dialer.dials.Load()-1, "one data connection (plus the bootstrap one)")
}

func TestInvokeErrors(t *testing.T) {
	key := "user:7"
	for _, tc := range []struct {
		name     string
		opts     []Option
		setup    func(mc *mockEngine, kv *zarismock.MockZarisKv, cancel context.CancelFunc)
		kind     error // the sentinel the error must match, or nil for none
		not      []error
		is       []error
		sent     bool
		answered bool
		closed   bool // the connection was closed
	}{
		{
			name: "transport failure",
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, _ context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, thrift.NewTTransportException(thrift.END_OF_FILE, "EOF"))
			},
			kind: ErrTransport, sent: true, closed: true,
		},
		{
			name: "protocol failure",
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, _ context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, thrift.NewTProtocolExceptionWithType(thrift.INVALID_DATA, errors.New("bad data")))
			},
			kind: ErrTransport, sent: true, closed: true,
		},
		{
			name: "application exception",
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, _ context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom"))
			},
			not: []error{ErrTransport, ErrNodeUnavailable, ErrAttemptTimeout}, sent: true, closed: true,
		},
		{
			name: "attempt timeout",
			opts: []Option{WithAttemptTimeout(20 * time.Millisecond)},
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, _ context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, _ *zaris.GetRequest) (*zaris.GetResponse, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				})
			},
			kind: ErrAttemptTimeout, not: []error{context.DeadlineExceeded, ErrTransport}, sent: true, closed: true,
		},
		{
			name: "caller cancelled",
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, cancel context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, _ *zaris.GetRequest) (*zaris.GetResponse, error) {
					cancel()
					return nil, thrift.NewTTransportException(thrift.TIMED_OUT, "i/o timeout")
				})
			},
			is: []error{context.Canceled}, not: []error{ErrTransport, ErrAttemptTimeout}, sent: true, closed: true,
		},
		{
			name: "neither response nor error",
			setup: func(_ *mockEngine, kv *zarismock.MockZarisKv, _ context.CancelFunc) {
				kv.EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, nil)
			},
			is: []error{ErrNoResponse}, not: []error{ErrTransport}, sent: true, closed: true,
		},
		{
			name: "dial refused",
			setup: func(mc *mockEngine, _ *zarismock.MockZarisKv, _ context.CancelFunc) {
				mc.dialer.fail = func(string) error { return errors.New("connection refused") }
			},
			kind: ErrNodeUnavailable, not: []error{ErrTransport},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMockEngine(t, testMap(2, 16, 2), tc.opts...)
			owner := mc.ownerOf(t, key)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.setup(mc, mc.node(owner), cancel)
			call := getCall(key)
			resp, err := mc.Invoke(ctx, call)
			require.Error(t, err)
			assert.Nil(t, resp)
			if tc.kind != nil {
				assert.ErrorIs(t, err, tc.kind)
			}
			for _, e := range tc.is {
				assert.ErrorIs(t, err, e)
			}
			for _, e := range tc.not {
				assert.NotErrorIs(t, err, e)
			}
			var ne *NodeError
			require.ErrorAs(t, err, &ne)
			assert.Equal(t, int32(owner), ne.Node)
			assert.Contains(t, err.Error(), "Get at node")
			a := call.Attempts[0]
			assert.Equal(t, tc.sent, a.Sent)
			assert.False(t, a.Answered)
			assert.Equal(t, err, a.Err)
			assert.Equal(t, int32(owner), a.Node)
			assert.Equal(t, int64(2), a.MapEpoch)
			if tc.closed {
				assert.Zero(t, mc.dialer.openConns(), "a connection that saw an error is closed")
			}
		})
	}
}

func TestInvokeThriftErrorsKeepTheirType(t *testing.T) {
	mc := newMockEngine(t, testMap(2, 16, 2))
	key := "k"
	mc.node(mc.ownerOf(t, key)).EXPECT().Get(gomock.Any(), gomock.Any()).Return(nil, thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "no"))
	_, err := mc.Invoke(context.Background(), getCall(key))
	var app thrift.TApplicationException
	require.ErrorAs(t, err, &app)
	assert.Equal(t, int32(thrift.UNKNOWN_METHOD), app.TypeId())
}

func TestInvokeNoOwnerIsPartitionUnavailable(t *testing.T) {
	m := testMap(3, 8, 2)
	key := "orphan"
	m.Segments[clustermap.SegmentOf([]byte(key), 8)].Owner = nil
	mc := newMockEngine(t, m)
	call := getCall(key)
	_, err := mc.Invoke(context.Background(), call)
	require.ErrorIs(t, err, ErrPartitionUnavailable)
	a := call.Attempts[0]
	assert.False(t, a.Sent)
	assert.Equal(t, clustermap.NoNode, a.Node)
	assert.Equal(t, int64(3), a.MapEpoch)
	assert.Equal(t, int32(1), mc.dialer.dials.Load(), "only the bootstrap dial")
}

func TestInvokeWithNoFreeConnectionIsNodeUnavailable(t *testing.T) {
	mc := newMockEngine(t, testMap(2, 16, 2), WithPoolSize(1), WithAttemptTimeout(20*time.Millisecond))
	key := "k"
	kv := mc.node(mc.ownerOf(t, key))
	release := make(chan struct{})
	kv.EXPECT().Get(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, _ *zaris.GetRequest) (*zaris.GetResponse, error) {
		<-release
		return &zaris.GetResponse{MapEpoch: 2}, nil
	})
	done := make(chan error)
	go func() {
		_, err := mc.Invoke(context.Background(), getCall(key))
		done <- err
	}()
	eventually(t, func() bool { return mc.dialer.dials.Load() == 2 })
	call := getCall(key)
	_, err := mc.Invoke(context.Background(), call)
	require.ErrorIs(t, err, ErrNodeUnavailable)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, call.Attempts[0].Sent, "no connection: provably never sent")
	close(release)
	require.NoError(t, <-done)
}

func TestInvokeAfterCloseIsErrClosed(t *testing.T) {
	mc := newMockEngine(t, testMap(2, 16, 2))
	key := "k"
	mc.node(mc.ownerOf(t, key)).EXPECT().Get(gomock.Any(), gomock.Any()).Return(&zaris.GetResponse{MapEpoch: 2}, nil)
	_, err := mc.Invoke(context.Background(), getCall(key))
	require.NoError(t, err)
	require.NoError(t, mc.Close())
	require.NoError(t, mc.Close(), "idempotent")
	call := getCall(key)
	_, err = mc.Invoke(context.Background(), call)
	assert.ErrorIs(t, err, ErrClosed)
	assert.False(t, call.Attempts[0].Sent)
	assert.Zero(t, mc.dialer.openConns())
	res := mc.Refresher().Refresh(context.Background(), clustermap.Evidence{Epoch: 99})
	assert.ErrorIs(t, res.Err, ErrClosed)
}

func TestDialNoSeedReachable(t *testing.T) {
	d := &fakeDialer{fail: func(addr string) error { return fmt.Errorf("dial %s: connection refused", addr) }}
	_, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds("10.0.0.1:1", "10.0.0.2:2"), WithDialer(d.dial))
	require.ErrorIs(t, err, ErrNoSeeds)
	assert.Contains(t, err.Error(), "10.0.0.1:1")
	assert.Contains(t, err.Error(), "10.0.0.2:2")
	assert.Contains(t, err.Error(), "connection refused")
}

func TestDialSkipsABadSeed(t *testing.T) {
	ctrl := gomock.NewController(t)
	good, bad := zarismock.NewMockZarisKv(ctrl), zarismock.NewMockZarisKv(ctrl)
	bad.EXPECT().GetClusterMap(gomock.Any()).Return(&zaris.ClusterMap{Epoch: 1}, nil) // invalid: no segments
	good.EXPECT().GetClusterMap(gomock.Any()).Return(testMap(3, 4, 1), nil)
	d := &fakeDialer{kv: func(addr string) zaris.ZarisKv {
		if addr == "bad:1" {
			return bad
		}
		return good
	}, fail: func(addr string) error {
		if addr == "down:1" {
			return errors.New("connection refused")
		}
		return nil
	}}
	c, err := Dial(context.Background(), WithService(testService), WithEnv(env(nil)), WithSeeds("down:1", "bad:1", "good:1"), WithDialer(d.dial))
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, int64(3), c.Map().Epoch)
	assert.Zero(t, d.openConns(), "bootstrap connections are closed")
}

// TestDialWithAnEndedContext: Dial's ctx bounds the bootstrap; once it has ended Dial
// stops at the first seed with an error matching both ErrNoSeeds and the context's error.
func TestDialWithAnEndedContext(t *testing.T) {
	d := &fakeDialer{}
	ended := map[string]func() (context.Context, context.CancelFunc){
		"cancelled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		"past its deadline": func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Unix(0, 0))
		},
	}
	for name, mk := range ended {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := mk()
			defer cancel()
			d.dials.Store(0)
			d.fail = func(string) error { return ctx.Err() } // a dialer honours its context
			_, err := Dial(ctx, WithService(testService), WithEnv(env(nil)), WithSeeds("10.0.0.1:1", "10.0.0.2:2"), WithDialer(d.dial))
			require.ErrorIs(t, err, ErrNoSeeds)
			require.ErrorIs(t, err, ctx.Err())
			assert.Equal(t, int32(1), d.dials.Load(), "no second seed is tried")
		})
	}
}

func TestDialRejectsBadConfig(t *testing.T) {
	_, err := Dial(context.Background(), WithService(testService), WithEnv(env(map[string]string{envRequestTimeout: "forever"})), WithSeeds("a:1"))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, envRequestTimeout, ce.Var)
}

func TestEngineAccessors(t *testing.T) {
	mc := newMockEngine(t, testMap(9, 4, 1), WithPoolSize(3))
	assert.Equal(t, 3, mc.Config().PoolSize)
	assert.Equal(t, int64(9), mc.Map().Epoch)
	assert.Equal(t, int64(9), mc.Refresher().Epoch())
	m := mc.Map()
	m.Epoch = 100
	assert.Equal(t, int64(9), mc.Map().Epoch, "Map returns a copy")

	mw := func(next Handler) Handler { return next }
	cls := func(Outcome) (Class, bool) { return Answer, true }
	mc = newMockEngine(t, testMap(9, 4, 1), WithCallMiddleware(mw), WithAttemptMiddleware(mw), WithClassifiers(cls))
	cfg := mc.Config()
	seed := cfg.Seeds[0]
	cfg.Seeds[0] = "elsewhere:1"
	cfg.CallMiddleware[0], cfg.AttemptMiddleware[0], cfg.Classifiers[0] = nil, nil, nil
	cfg = mc.Config()
	assert.Equal(t, seed, cfg.Seeds[0], "Config returns a copy")
	assert.NotNil(t, cfg.CallMiddleware[0])
	assert.NotNil(t, cfg.AttemptMiddleware[0])
	assert.NotNil(t, cfg.Classifiers[0])
}
