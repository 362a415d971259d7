package middleware

import (
	"context"
	"errors"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// closing is a MapRefresher that says when its client closes; runtime.Refresher is one.
type closing interface {
	Done() <-chan struct{}
}

// sleepUntilClosed returns clock, whose Sleep also ends when refresher's client closes, if
// refresher says when that happens; clock itself otherwise.
func sleepUntilClosed(clock clock.Clock, refresher MapRefresher) clock.Clock {
	c, ok := refresher.(closing)
	if !ok {
		return clock
	}
	return untilClosed{Clock: clock, done: c.Done()}
}

// untilClosed is a Clock whose Sleep ends with runtime.ErrClosed as soon as done is closed,
// so a call waiting out a backoff ends when its client closes instead of after the wait.
type untilClosed struct {
	clock.Clock
	done <-chan struct{}
}

// Sleep waits as the clock does, and returns runtime.ErrClosed at once if done is closed
// before or during the wait.
func (c untilClosed) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-c.done:
		return runtime.ErrClosed
	default:
	}
	if d <= 0 {
		return c.Clock.Sleep(ctx, d)
	}
	sleep, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-c.done:
			cancel(runtime.ErrClosed)
		case <-sleep.Done():
		}
	}()
	err := c.Clock.Sleep(sleep, d)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(sleep), runtime.ErrClosed) {
		return runtime.ErrClosed
	}
	return err
}
