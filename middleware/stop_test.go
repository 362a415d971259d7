package middleware_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
)

// B4: a StopError names its bound when it has no reason, and its reason when it has one,
// which it unwraps to.
func TestStopError_NamesItsBoundOrItsReason(t *testing.T) {
	assert.Equal(t, "zaris: call stopped by its deadline bound", (&middleware.StopError{Bound: runtime.BoundDeadline}).Error())
	stop := &middleware.StopError{Bound: runtime.BoundBudget, Err: runtime.ErrRetryBudgetExhausted}
	assert.Equal(t, "zaris: call stopped: "+runtime.ErrRetryBudgetExhausted.Error(), stop.Error())
	assert.ErrorIs(t, stop, runtime.ErrRetryBudgetExhausted)
}
