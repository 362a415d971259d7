package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleState(epoch uint64) State {
	return State{
		Epoch: epoch,
		Map:   []byte(fmt.Sprintf("map at epoch %d", epoch)),
		Members: map[int32]Member{
			1: {ID: 1, Addr: "127.0.0.1:7001", State: "up"},
			2: {ID: 2, Addr: "127.0.0.1:7002", State: "up"},
			3: {ID: 3, Addr: "127.0.0.1:7003", State: "down"},
		},
		Segments: map[int32][]int32{0: {1, 2}, 1: {2, 1}, 2: {1, 2}},
		Churn:    &ChurnStep{Kind: "failover", Node: 3, Step: 1, Data: json.RawMessage(`{"moved":[0]}`)},
	}
}

func TestStateStore_EmptyClusterLoadsAsZero(t *testing.T) {
	cli, prefix := ForTest(t)
	st, err := NewStateStore(cli, prefix).Load(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Epoch)
	assert.Zero(t, st.Revision)
	assert.Empty(t, st.Members)
	assert.Nil(t, st.Churn)
}

// What a coordinator committed is what a new coordinator (a new client, a new StateStore)
// loads: members, map, epoch, assignments and the churn step in progress.
func TestStateStore_NewCoordinatorLoadsWhatWasCommitted(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	committed, err := NewStateStore(cli, prefix).Commit(ctx, Fence{}, State{}, sampleState(1))
	require.NoError(t, err)
	require.Positive(t, committed.Revision)

	other, err := Connect(ctx, cli.Endpoints(), 5*time.Second)
	require.NoError(t, err)
	defer other.Close()
	loaded, err := NewStateStore(other, prefix).Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, committed, loaded)
}

// The state survives a restart of etcd itself from its data directory.
func TestStateStore_ReloadAfterEtcdRestart(t *testing.T) {
	ctx := context.Background()
	cfg := EmbedConfig{Dir: t.TempDir(), NoFsync: true}
	e, err := StartEmbedded(cfg)
	require.NoError(t, err)
	cli, err := Connect(ctx, e.Endpoints(), 5*time.Second)
	require.NoError(t, err)
	committed, err := NewStateStore(cli, "/c/").Commit(ctx, Fence{}, State{}, sampleState(7))
	require.NoError(t, err)
	require.NoError(t, cli.Close())
	e.Close()

	e, err = StartEmbedded(cfg)
	require.NoError(t, err)
	defer e.Close()
	cli, err = Connect(ctx, e.Endpoints(), 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	loaded, err := NewStateStore(cli, "/c/").Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, committed, loaded)
}

func TestStateStore_CommitsChangesMembersAndChurn(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	s := NewStateStore(cli, prefix)
	st, err := s.Commit(ctx, Fence{}, State{}, sampleState(1))
	require.NoError(t, err)

	next := sampleState(2)
	delete(next.Members, 3)
	next.Members[4] = Member{ID: 4, Addr: "127.0.0.1:7004", State: "joining"}
	next.Segments[2] = []int32{4, 1}
	next.Churn = nil
	st, err = s.Commit(ctx, Fence{}, st, next)
	require.NoError(t, err)
	loaded, err := s.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, st, loaded)
	assert.NotContains(t, loaded.Members, int32(3))
	assert.Nil(t, loaded.Churn, "the finished churn step is gone")

	// A churn step's progress is recorded at the same epoch, the map unchanged.
	step := loaded
	step.Churn = &ChurnStep{Kind: "migrate", Segment: 2, Step: 2}
	_, err = s.Commit(ctx, Fence{}, loaded, step)
	require.NoError(t, err)
	loaded, err = s.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), loaded.Epoch)
	assert.Equal(t, &ChurnStep{Kind: "migrate", Segment: 2, Step: 2}, loaded.Churn)
}

func TestStateStore_EpochNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	s := NewStateStore(cli, prefix)
	st, err := s.Commit(ctx, Fence{}, State{}, sampleState(5))
	require.NoError(t, err)

	_, err = s.Commit(ctx, Fence{}, st, sampleState(4))
	require.ErrorIs(t, err, ErrEpochBackwards)
	sameEpoch := sampleState(5)
	sameEpoch.Map = []byte("another map")
	_, err = s.Commit(ctx, Fence{}, st, sameEpoch)
	require.ErrorIs(t, err, ErrEpochBackwards, "a new map needs a new epoch")

	loaded, err := s.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, st, loaded, "nothing was written")
}

// Two coordinators that loaded the same state both try to commit the next epoch: one wins,
// the other is told its view is stale, and a writer that keeps an old state never commits.
func TestStateStore_StaleWriterLoses(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	s := NewStateStore(cli, prefix)
	base, err := s.Commit(ctx, Fence{}, State{}, sampleState(1))
	require.NoError(t, err)

	a, b := sampleState(2), sampleState(2)
	a.Map, b.Map = []byte("a's map"), []byte("b's map")
	_, errA := s.Commit(ctx, Fence{}, base, a)
	_, errB := s.Commit(ctx, Fence{}, base, b)
	require.NoError(t, errA)
	require.ErrorIs(t, errB, ErrStale)

	// Even with a higher epoch, a commit based on the old state is refused.
	_, err = s.Commit(ctx, Fence{}, base, sampleState(9))
	require.ErrorIs(t, err, ErrStale)
	loaded, err := s.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, []byte("a's map"), loaded.Map)
	assert.Equal(t, uint64(2), loaded.Epoch)
}

// Writers racing in a loop (load, raise the epoch, commit): every epoch is committed by
// exactly one writer, and the epochs a writer sees loading only go up.
func TestStateStore_ConcurrentWritersNeverLowerTheEpoch(t *testing.T) {
	ctx := context.Background()
	cli, prefix := ForTest(t)
	const writers, commitsEach = 4, 5
	var mu sync.Mutex
	won := map[uint64]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewStateStore(cli, prefix)
			var seen uint64
			for done := 0; done < commitsEach; {
				st, err := s.Load(ctx)
				if !assert.NoError(t, err) {
					return
				}
				assert.GreaterOrEqual(t, st.Epoch, seen, "writer %d saw the epoch go back", w)
				seen = st.Epoch
				next := st
				next.Epoch++
				next.Map = []byte(fmt.Sprintf("writer %d", w))
				_, err = s.Commit(ctx, Fence{}, st, next)
				if errors.Is(err, ErrStale) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				won[next.Epoch]++
				mu.Unlock()
				done++
			}
		}()
	}
	wg.Wait()
	require.Len(t, won, writers*commitsEach)
	for epoch := uint64(1); epoch <= writers*commitsEach; epoch++ {
		assert.Equal(t, 1, won[epoch], "epoch %d", epoch)
	}
}
