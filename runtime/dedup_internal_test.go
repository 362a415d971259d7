package runtime

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A replay refused under rule B8 says why: the map the replay would go by advertises no
// dedup window (it had one when the call began), or the window has passed.
func TestReplayError_SaysWhyThereIsNoReplay(t *testing.T) {
	none := &replayError{op: "Increment", window: 0}
	assert.Contains(t, none.Error(), "Increment was sent and no reply came back, and the cluster map advertises no dedup window")
	passed := &replayError{op: "Increment", window: time.Second}
	assert.Contains(t, passed.Error(), "its store's 1s dedup window has passed since the call began")
	assert.True(t, errors.Is(none, ErrInDoubt) && errors.Is(passed, ErrInDoubt))
}

// lostIncrement returns an engine whose map advertises a 1 s dedup window (its attempt
// timeout a minute), and a tokened Increment whose first attempt, started at start on the
// engine's clock, was sent and lost its reply; the clock is then 900 ms on. Its replay's
// call to the node is replay.
func lostIncrement(t *testing.T, replay func(ctx context.Context) (Response, error)) (mc *mockEngine, call *Call, start time.Time) {
	m := testMap(1, 16, 1)
	window := int64(1000)
	m.DedupWindowMs = &window
	mc = newMockEngine(t, m, WithAttemptTimeout(time.Minute))
	lost := false
	op := &Op{Name: "Increment", Kind: Write, TokenField: "token",
		Invoke: func(ctx context.Context, _ any, _ any) (Response, error) {
			if !lost {
				lost = true
				return nil, io.EOF // applied, and the reply lost
			}
			return replay(ctx)
		}}
	call = NewCall(op, []byte("k"), nil, false)
	call.Token = Token{Client: 1, Sequence: 1}
	start = mc.clock.Now()
	call.StartAttempt()
	_, err := mc.Invoke(context.Background(), call)
	require.Error(t, err)
	require.True(t, call.Current().Sent)
	mc.clock.Advance(900 * time.Millisecond)
	return mc, call, start
}

// A replay is bounded by what is left of the store's dedup window when it is shorter than
// the attempt timeout, so that it never reaches the store after the store may have
// forgotten the first outcome: here 100 ms left of a 1 s window (on the client's clock),
// against an attempt timeout of a minute. A custom Dialer's call gets the bound as its
// context's deadline.
func TestReplayBoundedByTheWindowLeft(t *testing.T) {
	var deadline time.Time
	mc, call, _ := lostIncrement(t, func(ctx context.Context) (Response, error) {
		deadline, _ = ctx.Deadline()
		return nil, io.EOF
	})
	call.StartAttempt()
	_, err := mc.Invoke(context.Background(), call)
	require.Error(t, err)
	require.False(t, deadline.IsZero(), "the replay was sent: %v", err)
	assert.Less(t, time.Until(deadline), 30*time.Second, "the replay: the 100 ms left of the window, not the attempt timeout")
}

// A call whose own deadline falls when the window ends keeps it as the call's deadline: a
// replay that meets it ends with the call's deadline (context.DeadlineExceeded), not with
// an attempt timeout.
func TestReplayBoundedByTheCallsDeadlineAtTheWindowsEnd(t *testing.T) {
	mc, call, start := lostIncrement(t, func(ctx context.Context) (Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	call.Deadline = start.Add(time.Second) // the window's end
	call.StartAttempt()
	_, err := mc.Invoke(context.Background(), call)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrAttemptTimeout)
}
