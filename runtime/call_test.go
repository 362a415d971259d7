package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clustron/zaris-go/runtime"
)

// Attempts are numbered from 1 (Attempt.N), in the order they start.
func TestCall_AttemptsAreNumberedFromOne(t *testing.T) {
	call := runtime.NewCall(&runtime.Op{Name: "Get"}, []byte("k"), nil, false)
	assert.Equal(t, 1, call.StartAttempt().N)
	assert.Equal(t, 2, call.StartAttempt().N)
	assert.Equal(t, 2, call.Current().N)
}
