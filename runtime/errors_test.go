package runtime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/clustron/zaris-go/gen/zaris"
)

// The terminal error names the bound and every attempt's node, epoch and outcome, and the
// last cause once.
func TestCallErrorMessage(t *testing.T) {
	refused := errors.New("connection refused")
	e := &CallError{
		Op: "Put", Bound: BoundAttempts, MaxAttempts: 2, Elapsed: 301 * time.Millisecond, Err: refused,
		Statuses: testStatuses,
		Attempts: []Attempt{
			{N: 1, Node: 2, MapEpoch: 7, Answered: true, Status: Status(zaris.KvStatus_Moved), AnswerEpoch: 8},
			{N: 2, Node: 3, MapEpoch: 8, Err: refused},
		},
	}
	msg := e.Error()
	assert.Equal(t, "zaris: Put: gave up after 2 of 2 attempts in 301ms; attempt 1 node 2 epoch 7: Moved (node epoch 8); attempt 2 node 3 epoch 8: connection refused", msg)
	assert.Equal(t, 1, strings.Count(msg, "connection refused"))
	assert.ErrorIs(t, e, refused)

	e.Err = NewStatusError(testStatuses, Status(zaris.KvStatus_Moved))
	e.Attempts = e.Attempts[:1]
	e.Bound = BoundDeadline
	assert.Equal(t, "zaris: Put: deadline passed after 1 attempt in 301ms; attempt 1 node 2 epoch 7: Moved (node epoch 8): zaris: status Moved", e.Error())
}

// A status this client does not know (a newer store's) is named by its number; a status
// error or attempt without a status table gives the number alone.
func TestStatusErrorNamesAnUnknownStatus(t *testing.T) {
	assert.Equal(t, "zaris: status Moved", NewStatusError(testStatuses, Status(zaris.KvStatus_Moved)).Error())
	assert.Equal(t, "zaris: status KvStatus(42)", NewStatusError(testStatuses, 42).Error())
	assert.Equal(t, "zaris: status 42", (&StatusError{Status: 42}).Error())
	a := Attempt{N: 1, Node: 1, Answered: true, Status: 42, AnswerEpoch: 3}
	assert.Equal(t, "attempt 1 node 1 epoch 0: KvStatus(42) (node epoch 3)", a.Describe(testStatuses))
	assert.Equal(t, "attempt 1 node 1 epoch 0: status(42) (node epoch 3)", a.String())
}

// A call that ended before its first attempt (its context had ended) says so, rather than
// naming an attempt 0.
func TestCallErrorBeforeAnyAttempt(t *testing.T) {
	e := &CallError{Op: "Get", Bound: BoundNone, MaxAttempts: 3, Err: errors.New("context canceled")}
	assert.Equal(t, "zaris: Get: ended before its first attempt in 0s: context canceled", e.Error())
}

// A call of one attempt whose error is the last cause names that cause once.
func TestCallErrorOfOneAttemptNamesItsCauseOnce(t *testing.T) {
	refused := errors.New("connection refused")
	e := &CallError{Op: "Get", Bound: BoundAttempts, MaxAttempts: 1, Err: refused,
		Attempts: []Attempt{{N: 1, Node: 2, MapEpoch: 7, Err: refused}}}
	assert.Equal(t, "zaris: Get: gave up after 1 of 1 attempts in 0s; attempt 1 node 2 epoch 7: connection refused", e.Error())
}
