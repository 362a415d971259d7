package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/runtime"
)

// incrementNode answers the map of itself and holds every Increment until the test ends,
// counting the Increments it received.
type incrementNode struct {
	zarisserver.UnimplementedZarisKv
	cmap       *zaris.ClusterMap
	increments atomic.Int32
	arrived    chan struct{}
	hold       chan struct{}
}

func (n *incrementNode) Increment(ctx context.Context, _ *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	n.increments.Add(1)
	n.arrived <- struct{}{}
	<-n.hold
	return &zaris.IncrementResponse{Status: zaris.KvStatus_Ok, MapEpoch: 1}, nil
}

func (n *incrementNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) { return n.cmap, nil }

func (n *incrementNode) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	return &zaris.GetResponse{Status: zaris.KvStatus_NotFound, MapEpoch: 1}, nil
}

// An operation the server does not implement (incrementNode serves no Put: the embedded
// Unimplemented base answers it) comes back at once as a fatal error naming it, after one
// attempt: no retry, no refresh.
func TestUnimplementedOperationIsFatal(t *testing.T) {
	h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
	close(h.hold)
	_, kv := dialIncrementNode(t, h)
	_, err := kv.Put(context.Background(), &zaris.PutRequest{Key: []byte("k"), Value: []byte("v")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "this server does not implement Put")
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1, "not retried")
	assert.Equal(t, runtime.Fatal, ce.Attempts[0].Class)
	assert.Equal(t, runtime.BoundNone, ce.Bound)
	assert.Zero(t, kv.Engine().Refresher().Stats().Requested, "no refresh")
}

// dialIncrementNode serves h on a killable node and dials it with one pipelined connection
// that carries every call; the client is closed when the test ends.
func dialIncrementNode(t *testing.T, h *incrementNode) (*runtime.KillableNode, *zarisclient.Client) {
	node := runtime.StartKillableNode(t, h)
	h.cmap = runtime.OneNodeMap(node.Addr)
	kv, err := zarisclient.Dial(context.Background(), runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds(node.Addr), runtime.WithPipelining(true), runtime.WithPipelineConns(1),
		runtime.WithBackoff(time.Millisecond), runtime.PipelineEveryCall())
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return node, kv
}

// TestPipelined_B2_IncrementInFlightOnAKilledNodeIsInDoubt: a non-idempotent Increment
// written on a pipelined connection when the node's connections die is reported in doubt
// and never replayed, while a Get in flight with it fails over to a retry and succeeds.
func TestPipelined_B2_IncrementInFlightOnAKilledNodeIsInDoubt(t *testing.T) {
	h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
	defer close(h.hold)
	node, kv := dialIncrementNode(t, h)

	errs := make(chan error, 1)
	go func() {
		_, err := kv.Increment(context.Background(), &zaris.IncrementRequest{Key: []byte("n"), Delta: 1})
		errs <- err
	}()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the Increment did not reach the node")
	}
	node.DropConns() // the node dies with the Increment in flight; it comes back at once
	err := errWithin(t, errs)
	require.ErrorIs(t, err, runtime.ErrInDoubt)
	require.ErrorIs(t, err, runtime.ErrTransport)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Len(t, ce.Attempts, 1, "not replayed")
	assert.True(t, ce.Attempts[0].Sent)
	assert.Equal(t, int32(1), h.increments.Load(), "the node saw the Increment once")

	resp, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("n")})
	require.NoError(t, err, "the engine reconnects")
	assert.Equal(t, zaris.KvStatus_NotFound, resp.Status)
}

// TestPipelined_B2_IncrementQueuedOnAKilledNodeIsRetriedOnce: a non-idempotent Increment
// still queued, never written, when its node's connections die was not sent: it is
// retried (rule B2), on a new connection, and the node applies it once.
func TestPipelined_B2_IncrementQueuedOnAKilledNodeIsRetriedOnce(t *testing.T) {
	h := &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}
	close(h.hold) // every Increment is answered at once
	node, kv := dialIncrementNode(t, h)
	_, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("warm")}) // opens the connection
	require.NoError(t, err)

	queued, release := runtime.HoldPipelinedWrites(kv.Engine(), node.Addr)
	defer release()
	errs := make(chan error, 1)
	go func() {
		_, err := kv.Increment(context.Background(), &zaris.IncrementRequest{Key: []byte("n"), Delta: 1})
		errs <- err
	}()
	require.Eventually(t, func() bool { return queued() == 1 }, 10*time.Second, time.Millisecond)
	node.DropConns() // the node's connections die with the Increment queued
	require.NoError(t, errWithin(t, errs), "retried, since it was never sent")
	assert.Equal(t, int32(1), h.increments.Load(), "the node applied the Increment once")
}

// errWithin returns the error errs delivers, failing the test when none comes within 10 s
// (a hang detector, not a timing assertion).
func errWithin(t *testing.T, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return")
		return nil
	}
}
