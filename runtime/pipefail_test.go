package runtime

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangBound is how long a test waits for something that, when the code is right, happens
// at once: it turns a caller that would wait forever into a failure within seconds instead
// of the suite's timeout. It is a hang detector, not a timing assertion.
const hangBound = 10 * time.Second

// within returns what ch delivers, failing the test when nothing comes within hangBound.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(hangBound)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing within %v", what, hangBound)
		var zero T
		return zero
	}
}

// waitGroupWithin waits for wg, failing the test when it is not done within hangBound.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, what)
}

// TestPipelined_FailTellsEveryCaller: when a pipelined connection fails, every caller
// waiting on it gets the failure at once, each written request in doubt (sent, B2) and
// each queued one never sent, and the connection counts none of them pending any more.
func TestPipelined_FailTellsEveryCaller(t *testing.T) {
	ps, conn := silentConn(t)
	// Far ahead: only the failure can end these calls.
	deadline := time.Now().Add(time.Hour)
	const written, queued = 3, 2
	var calls []*pcall
	var ends []<-chan error
	for i := range written {
		p, ended := getOnConn(ps, conn, "written", deadline, false)
		calls, ends = append(calls, p), append(ends, ended)
		eventually(t, func() bool { return conn.inFlight() == i+1 })
	}
	conn.writeMu.Lock() // the writer is busy: the next requests stay queued
	defer conn.writeMu.Unlock()
	for i := range queued {
		p, ended := getOnConn(ps, conn, "queued", deadline, false)
		calls, ends = append(calls, p), append(ends, ended)
		eventually(t, func() bool { return conn.queued() == i+1 })
	}

	cause := errors.New("connection reset")
	conn.fail(cause)
	for i, ended := range ends {
		err := within(t, ended, "a caller waiting on the failed connection")
		require.Error(t, err, "call %d", i)
		assert.ErrorContains(t, err, cause.Error(), "call %d", i)
	}
	for i, p := range calls {
		assert.Equal(t, i < written, p.wasSent, "call %d: written ones are in doubt, queued ones were never sent", i)
	}
	assert.Zero(t, conn.pending.Load())
	assert.ErrorContains(t, conn.failure(), cause.Error())
}
