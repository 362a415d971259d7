package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarisserver"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// dedupNode is a scripted store that keeps outcomes by request token, as rule B8 asks: the
// first Increment of a token is applied and held until the test releases it (so its reply
// can be lost); a request whose token it has seen is answered at once with the first
// outcome. It advertises window in its map (0: none, like a store without B8).
type dedupNode struct {
	zarisserver.UnimplementedZarisKv
	cmap    *zaris.ClusterMap
	arrived chan struct{}
	hold    chan struct{}

	mu      sync.Mutex
	value   int64
	seen    map[zaris.RequestToken]*zaris.IncrementResponse
	tokens  []zaris.RequestToken // every token received, in order
	applied int
}

func (n *dedupNode) Increment(ctx context.Context, req *zaris.IncrementRequest) (*zaris.IncrementResponse, error) {
	n.mu.Lock()
	tok := *req.Token
	n.tokens = append(n.tokens, tok)
	if first, ok := n.seen[tok]; ok {
		n.mu.Unlock()
		return first, nil
	}
	n.value += req.Delta
	n.applied++
	resp := &zaris.IncrementResponse{Status: zaris.KvStatus_Ok, Value: n.value, Version: int64(n.applied), MapEpoch: 1}
	n.seen[tok] = resp
	n.mu.Unlock()
	n.arrived <- struct{}{}
	<-n.hold
	return resp, nil
}

func (n *dedupNode) GetClusterMap(context.Context) (*zaris.ClusterMap, error) { return n.cmap, nil }

// startDedupNode serves a dedupNode advertising window on a killable node and dials it with
// one pipelined connection, clock the client's; the client is closed when the test ends.
func startDedupNode(t *testing.T, window time.Duration, clock clock.Clock) (*dedupNode, *runtime.KillableNode, *zarisclient.Client) {
	h := &dedupNode{arrived: make(chan struct{}, 8), hold: make(chan struct{}), seen: map[zaris.RequestToken]*zaris.IncrementResponse{}}
	t.Cleanup(func() { close(h.hold) })
	node := runtime.StartKillableNode(t, h)
	h.cmap = runtime.OneNodeMap(node.Addr)
	if window > 0 {
		ms := window.Milliseconds()
		h.cmap.DedupWindowMs = &ms
	}
	opts := []runtime.Option{runtime.WithEnv(func(string) (string, bool) { return "", false }),
		runtime.WithSeeds(node.Addr), runtime.WithPipelining(true), runtime.WithPipelineConns(1), runtime.WithBackoff(0), runtime.PipelineEveryCall()}
	if clock != nil {
		opts = append(opts, runtime.WithClock(clock))
	}
	kv, err := zarisclient.Dial(context.Background(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { kv.Close() })
	return h, node, kv
}

// incrementLosingTheReply sends one Increment, waits until the node applied it, runs
// between (with the reply still held), then drops the node's connections so the reply is
// lost, and returns the call's outcome.
func incrementLosingTheReply(t *testing.T, h *dedupNode, node *runtime.KillableNode, kv *zarisclient.Client, between func()) (*zaris.IncrementResponse, error) {
	t.Helper()
	type result struct {
		resp *zaris.IncrementResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := kv.Increment(context.Background(), &zaris.IncrementRequest{Key: []byte("n"), Delta: 5})
		done <- result{resp, err}
	}()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second): // a hang detector, not a timing assertion
		t.Fatal("the Increment did not reach the node")
	}
	between()
	node.DropConns() // the reply is lost: the node applied the Increment and cannot answer
	var errs = make(chan error, 1)
	var r result
	go func() { r = <-done; errs <- r.err }()
	errWithin(t, errs)
	return r.resp, r.err
}

// TestB8_ReplayedWithTheSameTokenWhenTheMapAdvertisesAWindow: an Increment applied at the
// node whose reply is lost is replayed with the same token, and the store's first outcome
// comes back with a nil error: applied once, no in-doubt error.
func TestB8_ReplayedWithTheSameTokenWhenTheMapAdvertisesAWindow(t *testing.T) {
	h, node, kv := startDedupNode(t, time.Minute, nil)
	resp, err := incrementLosingTheReply(t, h, node, kv, func() {})
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, resp.Status)
	assert.EqualValues(t, 5, resp.Value, "the first outcome")
	assert.EqualValues(t, 1, resp.Version)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, 1, h.applied, "applied once")
	require.Len(t, h.tokens, 2, "sent, then replayed")
	assert.Equal(t, h.tokens[0], h.tokens[1], "the same token on every attempt")
}

// TestB8_InDoubtWithoutAWindow: the same lost reply from a store whose map advertises no
// dedup window is in doubt (rule B2), never replayed, although the request carries a token.
func TestB8_InDoubtWithoutAWindow(t *testing.T) {
	h, node, kv := startDedupNode(t, 0, nil)
	_, err := incrementLosingTheReply(t, h, node, kv, func() {})
	require.ErrorIs(t, err, runtime.ErrInDoubt)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Len(t, ce.Attempts, 1, "not replayed")
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Len(t, h.tokens, 1, "the node saw the request once")
}

// TestB8_NoReplayPastTheWindow: the window is counted from the call's first attempt on the
// client's clock. A replay that would start later than the window after it is not sent:
// the call is in doubt. One that starts inside it is sent.
func TestB8_NoReplayPastTheWindow(t *testing.T) {
	for _, tc := range []struct {
		elapsed  time.Duration
		replayed bool
	}{
		{900 * time.Millisecond, true},
		{time.Second, false},
		{1500 * time.Millisecond, false},
	} {
		t.Run(tc.elapsed.String(), func(t *testing.T) {
			clock := runtime.NewFakeClock()
			h, node, kv := startDedupNode(t, time.Second, clock)
			_, err := incrementLosingTheReply(t, h, node, kv, func() { clock.Advance(tc.elapsed) })
			h.mu.Lock()
			defer h.mu.Unlock()
			assert.Equal(t, 1, h.applied)
			if tc.replayed {
				require.NoError(t, err)
				assert.Len(t, h.tokens, 2)
				return
			}
			require.ErrorIs(t, err, runtime.ErrInDoubt)
			assert.Contains(t, err.Error(), "1s dedup window has passed since the call began")
			assert.Len(t, h.tokens, 1, "no replay past the window")
		})
	}
}
