package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/clustron/zaris-go/internal/faketime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// fakeClock is a Clock whose time moves only when a test calls Advance; a Sleep waits for
// it, as on the real clock.
type fakeClock struct{ *faketime.Time }

func newFakeClock() *fakeClock {
	return &fakeClock{faketime.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (c *fakeClock) NewTimer(d time.Duration) clock.Timer { return c.Time.NewTimer(d) }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitPending waits until n timers are pending: the goroutines under test have reached
// their waits. It polls; the time it takes is not part of any assertion.
func (c *fakeClock) waitPending(t *testing.T, n int) {
	t.Helper()
	eventually(t, func() bool { return c.Pending() >= n })
}

// eventually polls cond until it holds, failing the test after a generous bound. It
// synchronises with goroutines; it asserts nothing about how long they took.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
