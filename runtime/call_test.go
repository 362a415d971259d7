package runtime_test

import (
	"testing"
	"time"

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

// Previous and Earlier read the attempts before the current one; DropAttempt forgets the
// current one, and the next attempt takes its number.
func TestCall_PreviousEarlierAndDropAttempt(t *testing.T) {
	call := runtime.NewCall(&runtime.Op{Name: "Get"}, []byte("k"), nil, false)
	assert.Nil(t, call.Previous())
	assert.Empty(t, call.Earlier())
	call.DropAttempt() // none yet: nothing to forget
	call.StartAttempt()
	assert.Nil(t, call.Previous())
	assert.Empty(t, call.Earlier())
	call.StartAttempt()
	call.StartAttempt()
	assert.Equal(t, 2, call.Previous().N)
	assert.Equal(t, []int{1, 2}, numbers(call.Earlier()))
	call.DropAttempt()
	assert.Equal(t, 2, call.Last().N)
	assert.Equal(t, 1, call.Previous().N)
	assert.Equal(t, 3, call.StartAttempt().N)
}

// An answer recorded on an attempt sets its status and epoch together.
func TestAttempt_RecordAnswer(t *testing.T) {
	var a runtime.Attempt
	a.RecordAnswer(7, 42)
	assert.True(t, a.Answered)
	assert.Equal(t, runtime.Status(7), a.Status)
	assert.Equal(t, int64(42), a.AnswerEpoch)
}

func numbers(as []runtime.Attempt) []int {
	var n []int
	for _, a := range as {
		n = append(n, a.N)
	}
	return n
}

// A call's overrides are what its CallOptions set, in order; WithTimeout of zero or less
// leaves no time, and the zero CallOption changes nothing.
func TestNewCall_CallOptions(t *testing.T) {
	c := runtime.NewCall(&runtime.Op{Name: "Get"}, nil, nil, false,
		runtime.WithMaxAttempts(5), runtime.CallOption{}, runtime.WithTimeout(2*time.Second), runtime.WithMaxAttempts(2))
	assert.Equal(t, 2, c.MaxAttempts, "the last WithMaxAttempts wins")
	assert.Equal(t, 2*time.Second, c.Timeout)
	assert.Negative(t, runtime.NewCall(&runtime.Op{}, nil, nil, false, runtime.WithTimeout(0)).Timeout)
	plain := runtime.NewCall(&runtime.Op{}, nil, nil, false, runtime.CallOption{})
	assert.Zero(t, plain.MaxAttempts)
	assert.Zero(t, plain.Timeout)
}
