// Package faketime is fake time for tests: a time that moves only when told, and timers that
// fire when it passes them. The client's fake clocks (middleware/middlewaretest.Clock and
// the runtime package's own tests) are built on it and add their Sleep.
package faketime

import (
	"slices"
	"sync"
	"time"
)

// Time is a fake current time and the timers waiting on it. It is safe for concurrent use.
type Time struct {
	mu     sync.Mutex // protects the fields below
	now    time.Time
	timers []*Timer
}

// New returns a Time at start.
func New(start time.Time) *Time { return &Time{now: start} }

// Now returns the fake time.
func (c *Time) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the time forward by d and fires every timer it passes.
func (c *Time) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.c <- c.now
			continue
		}
		kept = append(kept, t)
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// NewTimer returns a timer that fires when the time reaches now + d (at once for d <= 0).
func (c *Time) NewTimer(d time.Duration) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{time: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Pending returns how many timers are neither fired nor stopped.
func (c *Time) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Timer is a one-shot timer on a Time.
type Timer struct {
	time *Time
	at   time.Time
	c    chan time.Time
}

// C delivers the fake time once the timer fires.
func (t *Timer) C() <-chan time.Time { return t.c }

// Stop prevents the timer from firing; it reports whether it stopped it.
func (t *Timer) Stop() bool {
	t.time.mu.Lock()
	defer t.time.mu.Unlock()
	i := slices.Index(t.time.timers, t)
	if i < 0 {
		return false
	}
	t.time.timers = slices.Delete(t.time.timers, i, i+1)
	return true
}
