package demo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The counter check bites: an answer or a read-back that counts an increment twice, or
// misses an acknowledged one, is refused; one that unanswered increments explain is not.
func TestCounterState(t *testing.T) {
	c := &counterState{value: 3, unknown: 2}
	assert.False(t, c.answered(3), "an acknowledged increment that changed nothing")
	assert.False(t, c.answered(7), "more than the unknown increments explain")
	assert.True(t, c.answered(5), "one of the unknown increments applied meanwhile")
	assert.Equal(t, &counterState{value: 5, unknown: 1}, c)
	assert.True(t, c.holds(5))
	assert.True(t, c.holds(6), "the last unknown increment applied")
	assert.False(t, c.holds(4), "an acknowledged increment lost")
	assert.False(t, c.holds(7), "an increment applied twice")
	exact := &counterState{value: 2}
	assert.True(t, exact.holds(2))
	assert.False(t, exact.holds(3))
}
