package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// TestRequestTooLargeIsRefusedUnsent: a request larger than the client's message limit
// never leaves the client over a framed or header transport, pooled or pipelined: the call
// ends after one attempt, not sent, with an error matching ErrRequestTooLarge. An
// idempotent Put is not retried into the same refusal, and a non-idempotent Increment is
// not reported in doubt. A multi-key call whose sub-request is too large (an item alone
// can be: the batch layer keeps larger sub-requests from forming) gives its items that
// error. The buffered transport has no frame to check, and sends it.
func TestRequestTooLargeIsRefusedUnsent(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), 17<<20)
	for _, p := range []runtime.Protocol{runtime.ProtocolBinary, runtime.ProtocolHeader} {
		for _, pipelined := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s pipelined %v", p, pipelined), func(t *testing.T) {
				kv, h := oneNodeClient(t, runtime.WithProtocol(p), runtime.WithPipelining(pipelined))
				if pipelined {
					runtime.PipelineEveryCall(kv.Engine())
				}

				_, err := kv.Increment(context.Background(), &zaris.IncrementRequest{Key: huge, Delta: 1})
				requireTooLarge(t, err)
				assert.NotErrorIs(t, err, runtime.ErrInDoubt)
				_, err = kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: huge})
				requireTooLarge(t, err)
				assert.Zero(t, h.increments.Load(), "the node saw nothing")
				assert.Zero(t, kv.Engine().Refresher().Stats().Requested, "no refresh for a request that cannot fit")

				resp, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
				require.NoError(t, err, "the client goes on")
				assert.Equal(t, zaris.KvStatus_NotFound, resp.Status)
			})
		}
	}

	t.Run("buffered transport sends it", func(t *testing.T) {
		kv, _ := oneNodeClient(t, runtime.WithTransport(runtime.TransportBuffered), runtime.WithPipelining(false))
		_, err := kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: huge})
		assert.NotErrorIs(t, err, runtime.ErrRequestTooLarge)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.True(t, ce.Attempts[0].Sent, "no frame to check: the node got it (and refused Put)")
	})

	t.Run("MultiPut", func(t *testing.T) {
		kv, _ := oneNodeClient(t)
		items := []*zaris.PutItem{{Key: []byte("k"), Value: huge}}
		res, err := kv.MultiPut(context.Background(), &zaris.MultiPutRequest{Items: items})
		require.ErrorIs(t, err, runtime.ErrRequestTooLarge)
		for i := range items {
			requireTooLarge(t, res.Err(i))
		}
	})
}

// requireTooLarge checks err is a call's error after one attempt refused unsent as too large.
func requireTooLarge(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, runtime.ErrRequestTooLarge)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1, "not retried")
	assert.False(t, ce.Attempts[0].Sent)
	assert.Equal(t, runtime.Fatal, ce.Attempts[0].Class)
}

// oneNodeClient dials a client with opts to a node of its own, an incrementNode; both are
// closed when the test ends.
func oneNodeClient(t *testing.T, opts ...runtime.Option) (*zarisclient.Client, *incrementNode) {
	t.Helper()
	h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
	t.Cleanup(func() { close(h.hold) })
	node := runtime.StartKillableNode(t, h)
	h.cmap = runtime.OneNodeMap(node.Addr)
	opts = append([]runtime.Option{runtime.WithEnv(nil), runtime.WithSeeds(node.Addr), runtime.WithBackoff(time.Millisecond)}, opts...)
	kv, err := zarisclient.Dial(context.Background(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return kv, h
}
