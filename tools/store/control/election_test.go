package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// candidates returns two candidates "a" and "b" (sessions of ttlSeconds) of one cluster in
// the shared etcd, with its client and prefix; b is closed when the test ends, a too unless
// the test orphans it.
func candidates(t *testing.T, ttlSeconds int, closeA bool) (cli *clientv3.Client, prefix string, a, b *Elector) {
	t.Helper()
	cli, prefix = ForTest(t)
	a, err := NewElector(cli, prefix, "a", ttlSeconds)
	require.NoError(t, err)
	if closeA {
		t.Cleanup(func() { _ = a.Close() })
	}
	b, err = NewElector(cli, prefix, "b", ttlSeconds)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return cli, prefix, a, b
}

// awaitLeadership waits for the campaign behind standby to win and returns its fence.
func awaitLeadership(ctx context.Context, t *testing.T, standby <-chan Fence) Fence {
	t.Helper()
	select {
	case f, ok := <-standby:
		require.True(t, ok, "the standby's campaign failed")
		return f
	case <-ctx.Done():
		t.Fatal("the standby did not take over")
		return Fence{}
	}
}

// campaignAsync campaigns in the background and delivers the fence (or error) on the channel.
func campaignAsync(ctx context.Context, e *Elector) <-chan Fence {
	ch := make(chan Fence, 1)
	go func() {
		f, err := e.Campaign(ctx)
		if err == nil {
			ch <- f
		}
		close(ch)
	}()
	return ch
}

// The leader's session ends (as when its process dies and the lease runs out, or at once
// here by revoking it): the standby's campaign returns, the standby's fenced writes apply,
// and the deposed leader's fenced writes fail.
func TestElector_StandbyTakesOverAndFencesTheDeposedLeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, prefix, a, b := candidates(t, 5, true)

	fa, err := a.Campaign(ctx)
	require.NoError(t, err)
	require.True(t, a.Leading())
	standby := campaignAsync(ctx, b)
	leader, err := a.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", leader)

	states := NewStateStore(cli, prefix)
	st, err := states.Commit(ctx, fa, State{}, sampleState(1))
	require.NoError(t, err, "the leader's fenced write applies")
	select {
	case <-standby:
		t.Fatal("the standby leads while the leader lives")
	default:
	}
	assert.False(t, b.Leading())

	require.NoError(t, a.Close())
	fb := awaitLeadership(ctx, t, standby)
	assert.True(t, b.Leading())
	assert.False(t, a.Leading())
	_, leads := a.Fence()
	assert.False(t, leads)

	_, err = states.Commit(ctx, fa, st, sampleState(2))
	require.ErrorIs(t, err, ErrNotLeader, "the deposed leader's write fails")
	loaded, err := states.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, st, loaded)
	_, err = states.Commit(ctx, fb, loaded, sampleState(2))
	require.NoError(t, err, "the new leader continues from the loaded state")
}

// A leader that stops renewing without a word (kill -9) loses the leadership once its lease
// expires, and the standby takes over.
func TestElector_LeaderThatVanishesIsReplacedAfterItsTTL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, prefix, a, b := candidates(t, 1, false)
	fa, err := a.Campaign(ctx)
	require.NoError(t, err)
	standby := campaignAsync(ctx, b)

	a.session.Orphan() // stop the keep-alives; the lease is left to expire
	awaitLeadership(ctx, t, standby)
	_, err = NewStateStore(cli, prefix).Commit(ctx, fa, State{}, sampleState(1))
	require.ErrorIs(t, err, ErrNotLeader)
}

func TestElector_ResignHandsOver(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, a, b := candidates(t, 5, true)
	_, err := a.Campaign(ctx)
	require.NoError(t, err)
	standby := campaignAsync(ctx, b)
	require.NoError(t, a.Resign(ctx))
	assert.False(t, a.Leading())
	awaitLeadership(ctx, t, standby)
	leader, err := b.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", leader)
}
