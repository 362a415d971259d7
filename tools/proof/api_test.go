package proof

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// TestAPI_FailedDialLeavesNothing: a Dial that fails, on a bad option, a refused seed, or a
// seed that accepts and never answers until the caller gives up, leaves no goroutine.
func TestAPI_FailedDialLeavesNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	noEnv := runtime.WithEnv(nil)

	_, err := zarisclient.Dial(context.Background(), noEnv, runtime.WithSeeds("127.0.0.1:1"), runtime.WithPoolSize(0))
	var ce *runtime.ConfigError
	require.ErrorAs(t, err, &ce)

	refused, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := refused.Addr().String()
	require.NoError(t, refused.Close())
	_, err = zarisclient.Dial(context.Background(), noEnv, runtime.WithSeeds(addr))
	require.ErrorIs(t, err, runtime.ErrNoSeeds)

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := silent.Accept()
		if err == nil {
			accepted <- c
			cancel() // the caller gives up once the seed holds the connection
		}
	}()
	_, err = zarisclient.Dial(ctx, noEnv, runtime.WithSeeds(silent.Addr().String()))
	require.ErrorIs(t, err, runtime.ErrNoSeeds)
	require.ErrorIs(t, err, context.Canceled)
	(<-accepted).Close()
	silent.Close()
	cancel()

	goleak.VerifyNone(t, ignore)
}

// TestAPI_CloseUnderLoadLeavesNothing: Close with single-key and multi-key calls in flight
// on pipelined connections ends every call (an answer, or an error matching ErrClosed), and
// leaves no goroutine; calls after Close fail with ErrClosed, and Close again returns nil.
func TestAPI_CloseUnderLoadLeavesNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ctx := context.Background()
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: 3})
	require.NoError(t, err)
	clusterClosed := false
	defer func() {
		if !clusterClosed {
			cluster.Close()
		}
	}()
	kv, err := zarisclient.Dial(ctx, runtime.WithEnv(nil), runtime.WithSeeds(cluster.Seeds()...))
	require.NoError(t, err)

	items := func(g, n int) ([]*zaris.GetItem, []*zaris.PutItem) {
		gets, puts := make([]*zaris.GetItem, n), make([]*zaris.PutItem, n)
		for i := range n {
			key := fmt.Appendf(nil, "g%d-k%d", g, i)
			gets[i], puts[i] = &zaris.GetItem{Key: key}, &zaris.PutItem{Key: key, Value: key}
		}
		return gets, puts
	}
	started := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	for g := range 16 {
		wg.Go(func() {
			gets, puts := items(g, 50)
			signalled := false
			for i := 0; ; i++ {
				var err error
				switch i % 3 {
				case 0:
					_, err = kv.MultiPut(ctx, &zaris.MultiPutRequest{Items: puts})
				case 1:
					_, err = kv.MultiGet(ctx, &zaris.MultiGetRequest{Items: gets})
				default:
					_, err = kv.Get(ctx, &zaris.GetRequest{Key: gets[0].Key})
				}
				if (i == 3 || err != nil) && !signalled {
					started <- struct{}{}
					signalled = true
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 16 {
		<-started
	}
	require.NoError(t, kv.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, runtime.ErrClosed)
	}

	_, err = kv.Get(ctx, &zaris.GetRequest{Key: []byte("k")})
	require.ErrorIs(t, err, runtime.ErrClosed)
	res, err := kv.MultiPut(ctx, &zaris.MultiPutRequest{Items: []*zaris.PutItem{{Key: []byte("k"), Value: []byte("v")}}})
	require.ErrorIs(t, err, runtime.ErrClosed)
	require.ErrorIs(t, res.Err(0), runtime.ErrClosed)
	require.NoError(t, kv.Close())
	eventually(t, func() bool { return len(clientGoroutines()) == 0 }, func() string {
		return strings.Join(clientGoroutines(), "\n\n")
	})
	// The cluster's goroutines come and go with its own traffic: with it closed too,
	// every goroutine since the start is gone.
	require.NoError(t, cluster.Close())
	clusterClosed = true
	goleak.VerifyNone(t, ignore)
}

// TestAPI_AnswersComeStraightBack: NotFound and Conflict, from single-key and multi-key
// calls, come back with a nil error after one attempt, never retried.
func TestAPI_AnswersComeStraightBack(t *testing.T) {
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	ctx := context.Background()
	var mu sync.Mutex
	attempts := map[string]int{}
	count := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			mu.Lock()
			attempts[call.Op.Name] += len(call.Attempts)
			mu.Unlock()
			return resp, err
		}
	}
	kv, err := zarisclient.Dial(ctx, runtime.WithEnv(nil), runtime.WithSeeds(cluster.Seeds()...), runtime.WithCallMiddleware(count))
	require.NoError(t, err)
	defer kv.Close()

	get, err := kv.Get(ctx, &zaris.GetRequest{Key: []byte("absent")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, get.Status)
	put, err := kv.Put(ctx, &zaris.PutRequest{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, put.Status)
	absent := true
	put, err = kv.Put(ctx, &zaris.PutRequest{Key: []byte("k"), Value: []byte("w"), IfAbsent: &absent})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Conflict, put.Status)
	stale := put.Version + 7
	del, err := kv.Delete(ctx, &zaris.DeleteRequest{Key: []byte("k"), IfMatchVersion: &stale})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Conflict, del.Status)

	// A duplicate key in one batch is sent and answered twice, in request order: the
	// guarded second write of "d" conflicts with the first.
	mput, err := kv.MultiPut(ctx, &zaris.MultiPutRequest{Items: []*zaris.PutItem{
		{Key: []byte("d"), Value: []byte("1"), IfAbsent: &absent},
		{Key: []byte("d"), Value: []byte("2"), IfAbsent: &absent},
		{Key: []byte("k"), Value: []byte("x"), IfAbsent: &absent},
	}})
	require.NoError(t, err)
	for i, want := range []zaris.KvStatus{zaris.KvStatus_Ok, zaris.KvStatus_Conflict, zaris.KvStatus_Conflict} {
		assert.Equal(t, want, mput.Response.Results[i].Status, "item %d", i)
		assert.NoError(t, mput.Err(i))
	}
	mget, err := kv.MultiGet(ctx, &zaris.MultiGetRequest{Items: []*zaris.GetItem{{Key: []byte("absent")}, {Key: []byte("d")}}})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_NotFound, mget.Response.Results[0].Status)
	assert.Equal(t, "1", string(mget.Response.Results[1].Value))

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"Get": 1, "Put": 2, "Delete": 1}, map[string]int{"Get": attempts["Get"], "Put": attempts["Put"], "Delete": attempts["Delete"]})
	assert.LessOrEqual(t, attempts["MultiPut"], 3, "one sub-request per owner, none retried")
	assert.LessOrEqual(t, attempts["MultiGet"], 2)
}

// TestAPI_BatchOverTheNodesMessageLimit: five values of 1000 KiB, each valid, to one owner
// (5 MB, over the reference node's 4 MiB message limit). The batch layer splits one owner's
// items into sub-requests of at most middleware.BatchMaxBytes, so the MultiPut is served in
// five sub-requests. A MultiGet's reply is not split by the node: the first sub-request,
// whose reply would be over the limit, fails on its connection (the node closes it), and the
// batch layer sends its items in halves in the next round, where every item is answered.
func TestAPI_BatchOverTheNodesMessageLimit(t *testing.T) {
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	ctx := context.Background()
	var stats runtime.BatchStats // the last multi-key call's
	record := func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			if call.Batch != nil {
				stats = call.Batch.Stats
			}
			return resp, err
		}
	}
	kv, err := zarisclient.Dial(ctx, runtime.WithEnv(nil), runtime.WithSeeds(cluster.Seeds()...),
		runtime.WithDefaultMaxAttempts(2), runtime.WithBackoff(time.Millisecond), runtime.WithCallMiddleware(record),
		// The rounds are counted: megabytes under the race detector on a busy machine may
		// take longer than the default attempt timeout, which would add a round.
		runtime.WithAttemptTimeout(time.Minute))
	require.NoError(t, err)
	defer kv.Close()

	owner, err := kv.Engine().Route([]byte("k"))
	require.NoError(t, err)
	var puts []*zaris.PutItem
	var gets []*zaris.GetItem
	for i := 0; len(puts) < 5; i++ {
		key := fmt.Appendf(nil, "k%d", i)
		if r, err := kv.Engine().Route(key); err == nil && r.Node == owner.Node {
			value := bytes.Repeat([]byte{byte('a' + len(puts))}, 1000<<10)
			puts = append(puts, &zaris.PutItem{Key: key, Value: value})
			gets = append(gets, &zaris.GetItem{Key: key})
		}
	}
	res, err := kv.MultiPut(ctx, &zaris.MultiPutRequest{Items: puts})
	require.NoError(t, err)
	for i := range puts {
		require.NoError(t, res.Err(i), "item %d", i)
		assert.Equal(t, zaris.KvStatus_Ok, res.Response.Results[i].Status, "item %d", i)
	}
	assert.Equal(t, 1, stats.Rounds)
	assert.Equal(t, 5, stats.SubRequests, "one sub-request per 1000 KiB value")

	got, err := kv.MultiGet(ctx, &zaris.MultiGetRequest{Items: gets})
	require.NoError(t, err)
	for i, r := range got.Response.Results {
		require.NoError(t, got.Err(i), "item %d", i)
		assert.Equal(t, zaris.KvStatus_Ok, r.Status, "item %d", i)
		assert.Equal(t, puts[i].Value, r.Value, "item %d", i)
	}
	assert.Equal(t, 2, stats.Rounds)
	assert.Equal(t, 3, stats.SubRequests, "all five, then three and two")
}

// TestAPI_OversizedPutIsAnAnswerNotChurn: the reference node says in its map how large a
// request it takes (maxMessageBytes: 4 MiB), so a 5 MiB Put fails at once with
// ErrRequestTooLarge, after one attempt that was never sent, naming its size and the
// limit: not three sends of 5 MiB each classified as a dead node. A value over the node's
// value limit that fits a message (1 MiB and one byte) is still the node's answer,
// InvalidRequest, and the client goes on.
func TestAPI_OversizedPutIsAnAnswerNotChurn(t *testing.T) {
	cluster := store.StartCluster(t, store.ClusterConfig{Nodes: 3})
	ctx := context.Background()
	kv, err := zarisclient.Dial(ctx, runtime.WithEnv(nil), runtime.WithSeeds(cluster.Seeds()...))
	require.NoError(t, err)
	defer kv.Close()
	assert.Equal(t, int64(4<<20), kv.Engine().Map().MaxMessageBytes, "the node's data-port limit")

	start := time.Now()
	_, err = kv.Put(ctx, &zaris.PutRequest{Key: []byte("big"), Value: bytes.Repeat([]byte("x"), 5<<20)})
	require.ErrorIs(t, err, runtime.ErrRequestTooLarge)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1, "not retried")
	assert.False(t, ce.Attempts[0].Sent, "sent 0 times")
	assert.Contains(t, err.Error(), "over the peer's limit of 4194304 bytes")
	t.Logf("refused in %s: %v", time.Since(start), err)

	resp, err := kv.Put(ctx, &zaris.PutRequest{Key: []byte("big"), Value: bytes.Repeat([]byte("x"), 1<<20+1)})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_InvalidRequest, resp.Status)
	resp, err = kv.Put(ctx, &zaris.PutRequest{Key: []byte("big"), Value: []byte("small")})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, resp.Status)
}
