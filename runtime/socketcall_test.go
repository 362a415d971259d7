package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A pooled connection's socket may end an attempt up to 1/64 of the attempt timeout late,
// never more than 10 ms late.
func TestLateAttemptTimeout_OneSixtyFourthAtMost10ms(t *testing.T) {
	assert.Equal(t, time.Millisecond, lateAttemptTimeout(64*time.Millisecond))
	assert.Equal(t, 5*time.Millisecond, lateAttemptTimeout(320*time.Millisecond))
	assert.Equal(t, 10*time.Millisecond, lateAttemptTimeout(5*time.Second))
}
