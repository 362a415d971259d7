package faketime

import (
	"testing"
	"time"
)

func TestTimersFireWhenTimePassesThem(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(start)
	early, late, stopped := c.NewTimer(time.Second), c.NewTimer(3*time.Second), c.NewTimer(2*time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports true once, for a pending timer")
	}
	if c.Pending() != 2 {
		t.Fatalf("%d pending, want 2", c.Pending())
	}
	c.Advance(2 * time.Second)
	select {
	case at := <-early.C():
		if !at.Equal(start.Add(2 * time.Second)) {
			t.Errorf("fired at %v", at)
		}
	default:
		t.Fatal("the timer the time passed did not fire")
	}
	select {
	case <-late.C():
		t.Fatal("a timer fired early")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if late.Stop() != true || c.Pending() != 0 {
		t.Error("the late timer was pending")
	}
	if now := c.NewTimer(0); len(now.C()) != 1 || c.Pending() != 0 {
		t.Error("a timer of no duration fires at once")
	}
}
