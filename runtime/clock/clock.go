// Package clock is a Zaris client's source of time. Every timing rule of the client
// (backoff, deadlines, the map refresh's debounce and wait, the watch on silent nodes)
// reads time and waits through a Clock, so a test can inject a fake one
// (middlewaretest.NewClock) with runtime.WithClock and check the rules exactly, without
// wall-clock sleeps. System is the real clock.
package clock

import (
	"context"
	"time"
)

// Clock is the client's source of time. Every timing rule (backoff, deadline, refresh
// debounce and wait) reads time and waits through it, so tests can inject a fake one and
// check the rules exactly, without wall-clock sleeps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, in which case it returns ctx.Err().
	// A d of zero or less returns at once (with ctx.Err() if ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// System is the real clock.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
