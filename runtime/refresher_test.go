package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// blockingMaps makes node id answer GetClusterMap with the maps sent on the returned
// channel, one per call, counting calls.
func (mc *mockEngine) blockingMaps(id int) (maps chan *zaris.ClusterMap, calls *atomic.Int32) {
	maps = make(chan *zaris.ClusterMap)
	calls = new(atomic.Int32)
	mc.node(id).EXPECT().GetClusterMap(gomock.Any()).AnyTimes().DoAndReturn(func(ctx context.Context) (*zaris.ClusterMap, error) {
		calls.Add(1)
		select {
		case m := <-maps:
			return m, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	return maps, calls
}

func TestR6_ConcurrentRequestsRideOneFetch(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	maps, calls := mc.blockingMaps(1)
	mc.clock.Advance(time.Second) // past the bootstrap's debounce window
	r := mc.Refresher()

	const n = 1000
	results := make([]clustermap.RefreshResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = r.Refresh(context.Background(), clustermap.Evidence{}) })
	}
	eventually(t, func() bool { return calls.Load() == 1 && r.Stats().Requested == n })
	maps <- testMap(2, 16, 1)
	wg.Wait()

	assert.Equal(t, int32(1), calls.Load(), "exactly one GetClusterMap for 1000 requests")
	st := r.Stats()
	assert.Equal(t, uint64(n), st.Requested)
	assert.Equal(t, uint64(1), st.Performed)
	assert.Equal(t, uint64(n-1), st.Coalesced+st.Debounced, "everyone but the leader joined the flight or came after it")
	assert.Zero(t, st.TimedOut)
	leaders := 0
	for _, res := range results {
		assert.True(t, res.Performed || res.Debounced)
		assert.NoError(t, res.Err)
		assert.Equal(t, int64(2), res.Epoch)
		if res.Performed && !res.Coalesced {
			leaders++
		}
	}
	assert.Equal(t, 1, leaders)
	assert.Equal(t, int64(2), mc.Map().Epoch)
}

func TestR6_CallerWhoseWaitExpiresReturnsWhileTheRefreshCompletesForOthers(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1), WithRefreshWait(15*time.Second))
	maps, calls := mc.blockingMaps(1)
	mc.clock.Advance(time.Second)
	r := mc.Refresher()

	early := make(chan clustermap.RefreshResult)
	go func() { early <- r.Refresh(context.Background(), clustermap.Evidence{}) }()
	mc.clock.waitPending(t, 1)
	mc.clock.Advance(10 * time.Second)
	late := make(chan clustermap.RefreshResult)
	go func() { late <- r.Refresh(context.Background(), clustermap.Evidence{}) }()
	cancelled := make(chan clustermap.RefreshResult)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { cancelled <- r.Refresh(ctx, clustermap.Evidence{}) }()
	mc.clock.waitPending(t, 3)

	// The early caller's 15 s are up; the late one has waited only 5 s.
	mc.clock.Advance(5 * time.Second)
	res := <-early
	assert.True(t, res.TimedOut)
	assert.False(t, res.Performed)
	assert.Equal(t, int64(1), res.Epoch)

	// A caller whose own context ends goes on too.
	cancel()
	res = <-cancelled
	assert.True(t, res.TimedOut)

	// The fetch was not cancelled: it completes for the caller still waiting.
	maps <- testMap(2, 16, 1)
	res = <-late
	assert.True(t, res.Performed)
	assert.True(t, res.Coalesced)
	assert.False(t, res.TimedOut)
	assert.Equal(t, int64(2), res.Epoch)
	assert.Equal(t, int32(1), calls.Load())
	st := r.Stats()
	assert.Equal(t, uint64(2), st.TimedOut)
	assert.Equal(t, uint64(1), st.Performed)
}

func TestR6_SlowRefreshDoesNotBlockHealthyCalls(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 2))
	maps, _ := mc.blockingMaps(1)
	mc.clock.Advance(time.Second)
	for id := 1; id <= 2; id++ {
		mc.node(id).EXPECT().Get(gomock.Any(), gomock.Any()).AnyTimes().Return(&zaris.GetResponse{Status: zaris.KvStatus_Ok, MapEpoch: 1}, nil)
	}
	refreshed := make(chan clustermap.RefreshResult)
	go func() { refreshed <- mc.Refresher().Refresh(context.Background(), clustermap.Evidence{}) }()
	eventually(t, func() bool { return mc.Refresher().inflight.Load() })

	// While the fetch hangs, calls to every segment go on.
	for i := range 100 {
		_, err := mc.Invoke(context.Background(), getCall(string(rune('a'+i%26))+"key"))
		require.NoError(t, err)
	}
	select {
	case <-refreshed:
		t.Fatal("the refresh should still be in flight")
	default:
	}
	maps <- testMap(2, 16, 2)
	assert.True(t, (<-refreshed).Performed)
}

func TestR6_DebounceWithinHalfASecondOfTheLastRefresh(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	var calls atomic.Int32
	epoch := int64(1)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).AnyTimes().DoAndReturn(func(context.Context) (*zaris.ClusterMap, error) {
		calls.Add(1)
		epoch++
		return testMap(epoch, 16, 1), nil
	})
	r := mc.Refresher()

	// The bootstrap is not a refresh: the first request fetches at once.
	res := r.Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.Performed, "the bootstrap opens no debounce window")
	assert.Equal(t, int64(2), res.Epoch)
	assert.Equal(t, int32(1), calls.Load())

	// Inside 500 ms of that fetch a request is a no-op.
	mc.clock.Advance(499 * time.Millisecond)
	res = r.Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.Debounced)
	assert.False(t, res.Performed)
	assert.Equal(t, int32(1), calls.Load())

	mc.clock.Advance(time.Millisecond)
	res = r.Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.Performed)
	assert.Equal(t, int64(3), res.Epoch)
	assert.Equal(t, int32(2), calls.Load())

	mc.clock.Advance(250 * time.Millisecond)
	assert.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Debounced)
	assert.True(t, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 3}).Debounced, "evidence not newer than the map")
	mc.clock.Advance(250 * time.Millisecond)
	assert.True(t, r.Refresh(context.Background(), clustermap.Evidence{}).Performed)
	assert.Equal(t, int32(3), calls.Load())
	st := r.Stats()
	assert.Equal(t, clustermap.RefreshStats{Requested: 6, Performed: 3, Debounced: 3}, st)
}

func TestB1_NewerEpochSkipsTheDebounce(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1))
	var calls atomic.Int32
	var serve atomic.Int64
	serve.Store(1)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).AnyTimes().DoAndReturn(func(context.Context) (*zaris.ClusterMap, error) {
		calls.Add(1)
		return testMap(serve.Load(), 16, 1), nil
	})
	r := mc.Refresher()

	// Inside the window, an answer from epoch 2 skips the debounce...
	mc.clock.Advance(100 * time.Millisecond)
	res := r.Refresh(context.Background(), clustermap.Evidence{Epoch: 2})
	assert.True(t, res.Performed)
	assert.False(t, res.Debounced)
	assert.Equal(t, int32(1), calls.Load())
	// ... but the node asked still had epoch 1. The same evidence does not fetch again
	// inside the window (no storm); newer evidence does.
	assert.Equal(t, int64(1), res.Epoch)
	assert.True(t, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 2}).Debounced)
	serve.Store(3)
	res = r.Refresh(context.Background(), clustermap.Evidence{Epoch: 3})
	assert.True(t, res.Performed)
	assert.Equal(t, int64(3), res.Epoch)
	assert.Equal(t, int32(2), calls.Load())
}

func TestB1_ObserveRefreshesInTheBackground(t *testing.T) {
	mc := newMockEngine(t, testMap(5, 16, 1))
	maps, calls := mc.blockingMaps(1)
	r := mc.Refresher()

	// Not newer: nothing happens (and it costs one atomic load).
	r.Observe(5)
	r.Observe(4)
	assert.Zero(t, calls.Load())

	// Newer, inside the debounce window: a fetch starts and Observe does not wait for it.
	r.Observe(6)
	eventually(t, func() bool { return calls.Load() == 1 })
	r.Observe(7) // already in flight: no second fetch
	// A caller with the same evidence rides the same flight.
	res := make(chan clustermap.RefreshResult)
	go func() { res <- r.Refresh(context.Background(), clustermap.Evidence{Epoch: 7}) }()
	eventually(t, func() bool { return r.Stats().Requested == 1 })
	maps <- testMap(7, 16, 1)
	got := <-res
	assert.True(t, got.Performed)
	assert.Equal(t, int64(7), got.Epoch)
	assert.Equal(t, int32(1), calls.Load())

	allocs := testing.AllocsPerRun(100, func() { r.Observe(7) })
	assert.Zero(t, allocs)
}

func TestR6_OlderEpochIsIgnored(t *testing.T) {
	mc := newMockEngine(t, testMap(5, 16, 1))
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(4, 16, 1), nil)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(5, 16, 1), nil)
	mc.clock.Advance(time.Second)
	res := mc.Refresher().Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.Performed)
	assert.NoError(t, res.Err)
	assert.Equal(t, int64(5), res.Epoch)
	mc.clock.Advance(time.Second)
	assert.Equal(t, int64(5), mc.Refresher().Refresh(context.Background(), clustermap.Evidence{}).Epoch)
	assert.Equal(t, int64(5), mc.Map().Epoch)
}

func TestRefreshTriesTheMapNodesThenTheSeeds(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 3))
	mc.clock.Advance(time.Second)
	// Node 1 (also the seed) is down, node 2 answers with a map, node 3 is never asked.
	mc.dialer.fail = func(addr string) error {
		if addr == "127.0.0.1:7001" {
			return errors.New("connection refused")
		}
		return nil
	}
	mc.node(2).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(2, 16, 3), nil)
	res := mc.Refresher().Refresh(context.Background(), clustermap.Evidence{})
	require.NoError(t, res.Err)
	assert.Equal(t, int64(2), res.Epoch)

	// When every node fails, the error names each, and the failure is counted.
	mc.clock.Advance(time.Second)
	mc.dialer.fail = func(string) error { return errors.New("connection refused") }
	// (node 2's pooled connection still works, but node 2 answers with an error)
	mc.node(2).EXPECT().GetClusterMap(gomock.Any()).Return(nil, errors.New("not ready"))
	res = mc.Refresher().Refresh(context.Background(), clustermap.Evidence{})
	require.Error(t, res.Err)
	assert.False(t, res.Performed)
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		assert.Contains(t, res.Err.Error(), addr)
	}
	assert.Equal(t, uint64(1), mc.Refresher().Stats().Failed)
	// A failed fetch does not start the debounce window.
	mc.dialer.fail = nil
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(3, 16, 3), nil)
	assert.Equal(t, int64(3), mc.Refresher().Refresh(context.Background(), clustermap.Evidence{}).Epoch)
}

func TestNodesLeavingTheMapHaveTheirPoolsClosed(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 2))
	mc.clock.Advance(time.Second)
	for id := 1; id <= 2; id++ {
		mc.node(id).EXPECT().Get(gomock.Any(), gomock.Any()).AnyTimes().Return(&zaris.GetResponse{MapEpoch: 1}, nil)
	}
	var toNode2 string
	for i := 0; toNode2 == ""; i++ {
		k := string(rune('a' + i))
		if mc.ownerOf(t, k) == 2 {
			toNode2 = k
		}
	}
	_, err := mc.Invoke(context.Background(), getCall(toNode2))
	require.NoError(t, err)
	var node2 *fakeConn
	for _, c := range mc.dialer.conns {
		if c.addr == "127.0.0.1:7002" {
			node2 = c
		}
	}
	require.NotNil(t, node2)
	assert.False(t, node2.closed())

	// Epoch 2 has node 1 only.
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(2, 16, 1), nil)
	require.Equal(t, int64(2), mc.Refresher().Refresh(context.Background(), clustermap.Evidence{}).Epoch)
	assert.True(t, node2.closed())
	_, ok := (*mc.pools.Load())["127.0.0.1:7002"]
	assert.False(t, ok)
	// A call routed with the old map to the departed node gets no connection: not sent.
	_, err = mc.Engine.Invoke(context.Background(), getCall(toNode2))
	require.NoError(t, err, "now routed to node 1")
	assert.Nil(t, mc.poolFor("127.0.0.1:7002"), "no pool is made for a node outside the map")
}

func TestR6_ZeroRefreshWaitDoesNotWaitButStillRefreshes(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 1), WithRefreshWait(0))
	maps, calls := mc.blockingMaps(1)
	mc.clock.Advance(time.Second)
	res := mc.Refresher().Refresh(context.Background(), clustermap.Evidence{})
	assert.True(t, res.TimedOut)
	assert.Equal(t, int64(1), res.Epoch)
	eventually(t, func() bool { return calls.Load() == 1 })
	maps <- testMap(2, 16, 1)
	eventually(t, func() bool { return mc.Refresher().Epoch() == 2 })
	assert.Equal(t, uint64(1), mc.Refresher().Stats().Performed)
}

// B1: nodes learn a new map one by one, so a refresh for an epoch an answer has shown passes
// over nodes that still serve an older map; with no node that new it takes the newest; with
// no evidence the first map wins.
func TestB1_FetchPassesOverANodeWithAnOlderMap(t *testing.T) {
	mc := newMockEngine(t, testMap(1, 16, 3))
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(2, 16, 3), nil)
	mc.node(2).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(4, 16, 3), nil)
	res := mc.Refresher().Refresh(context.Background(), clustermap.Evidence{Epoch: 4})
	require.NoError(t, res.Err)
	assert.Equal(t, int64(4), res.Epoch, "node 1 still had epoch 2")

	mc.clock.Advance(time.Second)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(5, 16, 3), nil)
	res = mc.Refresher().Refresh(context.Background(), clustermap.Evidence{})
	require.NoError(t, res.Err)
	assert.Equal(t, int64(5), res.Epoch, "without evidence node 1's map is taken, nodes 2 and 3 are not asked")

	mc.clock.Advance(time.Second)
	mc.node(1).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(5, 16, 3), nil)
	mc.node(2).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(7, 16, 3), nil)
	mc.node(3).EXPECT().GetClusterMap(gomock.Any()).Return(testMap(6, 16, 3), nil)
	res = mc.Refresher().Refresh(context.Background(), clustermap.Evidence{Epoch: 9})
	require.NoError(t, res.Err)
	assert.Equal(t, int64(7), res.Epoch, "no node has epoch 9 yet: the newest map is installed")
}

// A refresher's fetch gets RefreshWait, but never less than DialTimeout plus
// AttemptTimeout (a connection to dial, then one attempt), and DefaultRefreshWait when
// the Config (built by hand) gives neither.
func TestNewRefresher_FetchTimeout(t *testing.T) {
	for _, tc := range []struct {
		name                string
		wait, dial, attempt time.Duration
		want                time.Duration
	}{
		{"at least a dial and an attempt", 0, time.Second, 5 * time.Second, 6 * time.Second},
		{"a longer wait", 10 * time.Second, time.Second, 5 * time.Second, 10 * time.Second},
		{"nothing set", 0, 0, 0, DefaultRefreshWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRefresher(Config{RefreshWait: tc.wait, DialTimeout: tc.dial, AttemptTimeout: tc.attempt}, &currentTable{}, nil)
			defer r.Close()
			assert.Equal(t, tc.want, r.fetchTimeout)
		})
	}
}

// A refresh asks for a map at least as new as its evidence only when the evidence is
// newer than the current map (B1); otherwise for any map (minEpoch 0), which the first
// node to answer gives.
func TestRefresh_MinEpochOnlyForNewerEvidence(t *testing.T) {
	var mins []int64
	fetch := func(_ context.Context, minEpoch int64) (*clustermap.Map, error) {
		mins = append(mins, minEpoch)
		return fromIDL(testMap(5, 4, 1)), nil
	}
	router := &currentTable{}
	r := newRefresher(Config{Clock: newFakeClock(), RefreshWait: time.Hour, DialTimeout: time.Second, AttemptTimeout: time.Second}, router, fetch)
	defer r.Close()
	require.NoError(t, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 5}).Err)
	require.Equal(t, int64(5), router.Epoch())
	require.NoError(t, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 5}).Err, "evidence of the current map")
	require.NoError(t, r.Refresh(context.Background(), clustermap.Evidence{Epoch: 7}).Err, "evidence of a newer map")
	assert.Equal(t, []int64{5, 0, 7}, mins)
}

// A Refresher says when its client closes (Done, the interface the middleware package's
// default stack looks for), so the stack of every client built on an Engine ends its
// backoffs on Close.
func TestRefresher_DoneClosesOnClose(t *testing.T) {
	r := newRefresher(Config{}, &currentTable{}, func(context.Context, int64) (*clustermap.Map, error) {
		return nil, ErrNoSeeds
	})
	var c interface{ Done() <-chan struct{} } = r
	select {
	case <-c.Done():
		t.Fatal("Done is closed before Close")
	default:
	}
	r.Close()
	<-c.Done()
}
