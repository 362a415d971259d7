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

// A replay is bounded by what is left of the store's dedup window when it is shorter than
// the attempt timeout, so that it never reaches the store after the store may have
// forgotten the first outcome: here 100 ms left of a 1 s window (on the client's clock),
// against an attempt timeout of a minute. A custom Dialer's call gets the bound as its
// context's deadline.
func TestReplayBoundedByTheWindowLeft(t *testing.T) {
	m := testMap(1, 16, 1)
	window := int64(1000)
	m.DedupWindowMs = &window
	mc := newMockEngine(t, m, WithAttemptTimeout(time.Minute))
	var deadlines []time.Time
	op := &Op{Name: "Increment", Kind: Write, TokenField: "token",
		Invoke: func(ctx context.Context, _ any, _ any) (Response, error) {
			dl, _ := ctx.Deadline()
			deadlines = append(deadlines, dl)
			return nil, io.EOF // applied, and the reply lost
		}}
	call := NewCall(op, []byte("k"), nil, false)
	call.Token = Token{Client: 1, Sequence: 1}
	call.StartAttempt()
	_, err := mc.Invoke(context.Background(), call)
	require.Error(t, err)
	require.True(t, call.Current().Sent)
	mc.clock.Advance(900 * time.Millisecond)
	call.StartAttempt()
	_, err = mc.Invoke(context.Background(), call)
	require.Error(t, err)
	require.Len(t, deadlines, 2, "the first attempt and its replay: %v", err)
	assert.Greater(t, time.Until(deadlines[0]), 30*time.Second, "the first attempt: the attempt timeout")
	assert.Less(t, time.Until(deadlines[1]), 30*time.Second, "the replay: the 100 ms left of the window")
}
