package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// A CallPool gives back the calls put into it, so that a call of a typed client made by
// Dial allocates none; a nil one makes a Call per call and keeps none.
func TestCallPool_ReusesCalls(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector drops pooled items at random; make test runs this without it")
	}
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(func(string) (string, bool) { return "", false }), runtime.WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	pool := runtime.NewCallPool(cfg)
	require.NotNil(t, pool)
	req := &zaris.GetRequest{Key: []byte("k")}
	allocs := testing.AllocsPerRun(100, func() {
		call := pool.Get(zarisclient.OpGet, req.Key, req, false)
		call.StartAttempt()
		pool.Put(call)
	})
	assert.Zero(t, allocs)

	call := pool.Get(zarisclient.OpGet, req.Key, req, true, runtime.WithMaxAttempts(2))
	assert.Equal(t, runtime.NewCall(zarisclient.OpGet, req.Key, req, true, runtime.WithMaxAttempts(2)), call,
		"a reused call starts as a new one")

	var none *runtime.CallPool
	a, b := none.Get(zarisclient.OpGet, req.Key, req, false), none.Get(zarisclient.OpGet, req.Key, req, false)
	none.Put(a)
	assert.NotSame(t, a, b)
	assert.Same(t, req, a.Request, "a nil pool clears nothing")
}

// A client whose stack has middleware or classifiers of the user's reuses no Call: they
// may keep the calls they saw (Call's doc forbids it, but a client made before did not).
func TestCallPool_NoneUnderUserHooks(t *testing.T) {
	cfg, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(func(string) (string, bool) { return "", false }), runtime.WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	mw := func(next runtime.Handler) runtime.Handler { return next }
	cl := func(runtime.Outcome) (runtime.Class, bool) { return runtime.Unclassified, false }
	for name, opt := range map[string]runtime.Option{
		"call middleware":    runtime.WithCallMiddleware(mw),
		"attempt middleware": runtime.WithAttemptMiddleware(mw),
		"classifiers":        runtime.WithClassifiers(cl),
	} {
		c, err := runtime.NewConfig(runtime.WithService(zarisclient.Service), runtime.WithEnv(func(string) (string, bool) { return "", false }), runtime.WithSeeds("127.0.0.1:1"), opt)
		require.NoError(t, err)
		assert.Nil(t, runtime.NewCallPool(c), name)
	}
	assert.NotNil(t, runtime.NewCallPool(cfg))

	// The calls a user's middleware kept are still whole after the calls that followed.
	var kept []*runtime.Call
	keep := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			kept = append(kept, call)
			return next(ctx, call)
		}
	}
	_, client := memClients(t, runtime.WithCallMiddleware(keep))
	for _, k := range []string{"a", "b", "c"} {
		_, err := client.Get(context.Background(), &zaris.GetRequest{Key: []byte(k)})
		require.NoError(t, err)
	}
	require.Len(t, kept, 3)
	for i, k := range []string{"a", "b", "c"} {
		assert.Equal(t, k, string(kept[i].Key))
		assert.Same(t, zarisclient.OpGet, kept[i].Op)
		require.Len(t, kept[i].Attempts, 1)
		assert.True(t, kept[i].Attempts[0].Answered)
	}
}

// A call's CallError outlives its Call, which the client of Dial reuses for the calls that
// follow: it holds a copy of the attempts.
func TestCallPool_CallErrorOutlivesItsCall(t *testing.T) {
	node := startReplyNode(t)
	node.answer(runtime.ProtocolBinary, getReply(t, runtime.ProtocolBinary, "Get", thrift.EXCEPTION, 1, thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "boom")), true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(node.ln.Addr().String()), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithAttemptTimeout(2*time.Second), runtime.WithPipelining(false))
	require.NoError(t, err)
	defer kv.Close()

	_, err = kv.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1)
	first := ce.Attempts[0]
	want := ce.Error()

	value := &zaris.ZarisKvGetResult{Success: &zaris.GetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 1}}
	node.answer(runtime.ProtocolBinary, getReply(t, runtime.ProtocolBinary, "Get", thrift.REPLY, 1, value), true)
	for range 10 {
		// The node closes each connection after one reply: a call may take a retry.
		_, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
		require.NoError(t, err)
	}
	assert.Equal(t, want, ce.Error())
	require.Len(t, ce.Attempts, 1)
	assert.Equal(t, first, ce.Attempts[0])
	var appErr thrift.TApplicationException
	assert.True(t, errors.As(ce.Attempts[0].Err, &appErr))
}
