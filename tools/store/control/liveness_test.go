package control

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fakeClock is a Clock the test moves by hand; its wall clock can be skewed apart from its
// monotonic one.
type fakeClock struct {
	mu   sync.Mutex
	mono time.Duration
	wall time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{wall: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Mono() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }
func (c *fakeClock) Wall() time.Time     { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }

// advance moves both clocks by d.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.mono += d
	c.wall = c.wall.Add(d)
	c.mu.Unlock()
}

// skew steps the wall clock alone by d, as an NTP correction or a wrong clock would.
func (c *fakeClock) skew(d time.Duration) {
	c.mu.Lock()
	c.wall = c.wall.Add(d)
	c.mu.Unlock()
}

func TestLiveness_NoRightBeforeTheFirstRenewal(t *testing.T) {
	l := NewLiveness(newFakeClock(), 0)
	assert.False(t, l.CanServe())
	assert.Zero(t, l.Remaining())
}

// A renewal sent at 0 whose reply (granting 5s) comes back at 2s gives the right until 5s,
// not 7s: the right is measured from the send.
func TestLiveness_RightEndsTTLAfterTheSendNotTheReply(t *testing.T) {
	clock := newFakeClock()
	l := NewLiveness(clock, 0)
	sent := l.Sending()
	clock.advance(2 * time.Second)
	l.Renewed(sent, 5*time.Second)
	assert.True(t, l.CanServe())
	assert.Equal(t, 3*time.Second, l.Remaining())

	// Renewals stop: the right runs out at send + TTL.
	clock.advance(3*time.Second - time.Millisecond)
	assert.True(t, l.CanServe())
	clock.advance(time.Millisecond)
	assert.False(t, l.CanServe(), "5s after the send the right has ended, though the reply came at 2s")
	assert.Zero(t, l.Remaining())
}

func TestLiveness_MarginShortensTheRight(t *testing.T) {
	clock := newFakeClock()
	l := NewLiveness(clock, 500*time.Millisecond)
	l.Renewed(l.Sending(), 5*time.Second)
	clock.advance(4500 * time.Millisecond)
	assert.False(t, l.CanServe())
}

func TestLiveness_LateReplyToAnEarlierRenewalNeverShortens(t *testing.T) {
	clock := newFakeClock()
	l := NewLiveness(clock, 0)
	first := l.Sending()
	clock.advance(time.Second)
	second := l.Sending()
	l.Renewed(second, 5*time.Second) // until 6s
	l.Renewed(first, 5*time.Second)  // would be until 5s
	clock.advance(4500 * time.Millisecond)
	assert.True(t, l.CanServe())
	assert.Equal(t, 500*time.Millisecond, l.Remaining())
}

func TestLiveness_LeaseGoneEndsTheRightAtOnce(t *testing.T) {
	clock := newFakeClock()
	l := NewLiveness(clock, 0)
	l.Renewed(l.Sending(), 5*time.Second)
	l.Renewed(l.Sending(), 0)
	assert.False(t, l.CanServe(), "a reply with no TTL left: the lease is gone")

	l.Renewed(l.Sending(), 5*time.Second)
	l.Lost()
	assert.False(t, l.CanServe())
}

// The same renewals and waits with the wall clock stepped by ±10s between them give the same
// answers at every step: the wall clock decides nothing.
func TestLiveness_WallClockSkewHasNoEffect(t *testing.T) {
	for _, skew := range []time.Duration{10 * time.Second, -10 * time.Second} {
		steady, skewed := newFakeClock(), newFakeClock()
		a, b := NewLiveness(steady, 100*time.Millisecond), NewLiveness(skewed, 100*time.Millisecond)
		step := func(d time.Duration) {
			steady.advance(d)
			skewed.advance(d)
			skewed.skew(skew)
		}
		for i := range 20 {
			sa, sb := a.Sending(), b.Sending()
			step(300 * time.Millisecond) // the reply's round trip
			if i < 10 {
				a.Renewed(sa, 3*time.Second)
				b.Renewed(sb, 3*time.Second)
			}
			step(700 * time.Millisecond)
			assert.Equal(t, a.CanServe(), b.CanServe(), "skew %v, step %d", skew, i)
			assert.Equal(t, a.Remaining(), b.Remaining(), "skew %v, step %d", skew, i)
			if i < 10 {
				assert.True(t, b.CanServe(), "skew %v, step %d: renewed 0.7s ago", skew, i)
			}
		}
		assert.False(t, b.CanServe(), "renewals stopped 10s ago")
		assert.Equal(t, skewed.Wall(), b.Until(), "Until is the wall clock's now once the right ended")
	}
}
