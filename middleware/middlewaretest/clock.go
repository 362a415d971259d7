// Package middlewaretest provides fakes for testing middleware and anything built on the
// client's call model without a network or wall-clock sleeps: a Clock whose sleeps return at
// once and move its time forward, a scripted Transport that plays outcomes the way the
// real transport reports them, a Refresher that counts refresh requests, and Scripted, which
// lets a generated operation descriptor read a scripted answer. It imports no generated
// package: a test brings its service's generated operations.
package middlewaretest

import (
	"context"
	"sync"
	"time"

	"github.com/clustron/zaris-go/internal/faketime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// Epoch is the time a Clock made by NewClock starts at.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock.Clock. Its time moves only when something sleeps on it or the test
// calls Advance; a Sleep records its duration, moves the time forward by it and returns at
// once, so timing rules are checked exactly and tests run fast. It is safe for concurrent use.
type Clock struct {
	// OnSleep, when set, is called at the start of every Sleep with the sleeper's context
	// and duration, before time moves. A test cancels the context here to end a sleep
	// midway: Sleep then returns the context's error without moving time.
	OnSleep func(ctx context.Context, d time.Duration)

	time *faketime.Time

	mu     sync.Mutex // protects sleeps
	sleeps []time.Duration
}

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return &Clock{time: faketime.New(Epoch)} }

// Now returns the fake time.
func (c *Clock) Now() time.Time { return c.time.Now() }

// Sleep records d and moves the time forward by it, firing the timers it passes. It
// returns ctx.Err() at once, without moving time, when ctx is done before or during the
// sleep (see OnSleep). A d of zero or less returns ctx.Err() and is not recorded.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 || ctx.Err() != nil {
		return ctx.Err()
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	hook := c.OnSleep
	c.mu.Unlock()
	if hook != nil {
		hook(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// Advance moves the time forward by d, firing the timers it passes.
func (c *Clock) Advance(d time.Duration) { c.time.Advance(d) }

// Sleeps returns the durations slept so far, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// NewTimer returns a timer that fires when the fake time reaches now + d.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return c.time.NewTimer(d) }
