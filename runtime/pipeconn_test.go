package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A retired pipelined connection closes once it carries no request, and not before: at
// once when idle (closeIdle), else when its last request is released.
func TestPipeConn_RetiredClosesWhenItsLastRequestEnds(t *testing.T) {
	cfg, err := NewConfig(WithService(testService), WithEnv(env(nil)), WithSeeds("127.0.0.1:1"))
	require.NoError(t, err)
	ps := newPipelines(cfg)
	open := func() *pipeConn {
		client, _ := loopbackPair(t)
		c, err := newPipeConn(client, ps)
		require.NoError(t, err)
		t.Cleanup(func() { c.fail(errConnClosed); c.wg.Wait() })
		return c
	}

	idle := open()
	idle.closeIdle()
	assert.True(t, idle.failed.Load(), "idle: closed at once")

	busy := open()
	busy.pending.Add(2) // two requests on it
	busy.closeIdle()
	assert.False(t, busy.failed.Load(), "two requests on it")
	busy.release()
	assert.False(t, busy.failed.Load(), "one request on it")
	busy.release()
	assert.True(t, busy.failed.Load(), "its last request ended")
	assert.Equal(t, errConnClosed, busy.err)
}
