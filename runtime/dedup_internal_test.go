package runtime

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
