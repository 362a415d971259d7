package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// unavailableNode answers every Get Unavailable, so a call keeps retrying.
type unavailableNode struct {
	*incrementNode
	gets atomic.Int32
}

func (n *unavailableNode) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	n.gets.Add(1)
	return &zaris.GetResponse{Status: zaris.KvStatus_Unavailable, MapEpoch: 1}, nil
}

// A call of a client made by Dial that is waiting out a backoff when the client closes ends
// with ErrClosed, not at its deadline: its backoff is an hour long and its deadline a
// minute away, so only Close can end it within the test's bound.
func TestDial_CloseEndsACallInBackoff(t *testing.T) {
	h := &unavailableNode{incrementNode: &incrementNode{arrived: make(chan struct{}, 8), hold: make(chan struct{})}}
	t.Cleanup(func() { close(h.hold) })
	node := runtime.StartKillableNode(t, h)
	h.cmap = runtime.OneNodeMap(node.Addr)
	p := runtime.DefaultRetryPolicy
	p.Backoff, p.MaxBackoff, p.RequestTimeout = time.Hour, time.Hour, time.Minute
	kv, err := zarisclient.Dial(context.Background(), runtime.WithEnv(nil), runtime.WithSeeds(node.Addr), runtime.WithRetryPolicy(p))
	require.NoError(t, err)

	ended := make(chan error, 1)
	go func() {
		_, err := kv.Get(context.Background(), &zaris.GetRequest{Key: []byte("k")})
		ended <- err
	}()
	for h.gets.Load() == 0 {
		time.Sleep(time.Millisecond) // the first attempt is answered; the backoff follows
	}
	require.NoError(t, kv.Close())
	select {
	case err := <-ended:
		require.ErrorIs(t, err, runtime.ErrClosed)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.Attempts, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on waiting out its backoff after Close")
	}
}
