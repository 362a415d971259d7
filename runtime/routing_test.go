package runtime_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime"
)

// Before any map, a key has no segment: the Router's error is a *PartitionError with
// Segment -1 (not a segment a map could have) and epoch 0, on a route to NoNode.
func TestRouter_WithoutAMapNoSegment(t *testing.T) {
	var r runtime.Router
	rt, err := r.Route([]byte("k"))
	require.ErrorIs(t, err, runtime.ErrPartitionUnavailable)
	pe, ok := errors.AsType[*runtime.PartitionError](err)
	require.True(t, ok, "%T", err)
	assert.Equal(t, int32(-1), pe.Segment)
	assert.Zero(t, pe.Epoch)
	assert.Equal(t, runtime.NoNode, rt.Node)
}
