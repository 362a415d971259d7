package control

import (
	"sync"
	"time"
)

// Clock is a node's own clock. Mono is a monotonic reading (time since an arbitrary origin
// that never jumps); every duration that decides the right to serve is measured on it. Wall
// is the wall clock, used only to show times to people.
type Clock interface {
	Mono() time.Duration
	Wall() time.Time
}

// SystemClock returns the process's clock: Mono reads Go's monotonic clock.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Mono() time.Duration { return time.Since(c.origin) }
func (c systemClock) Wall() time.Time     { return time.Now() }

// Liveness is a node's right to serve, earned by renewing its etcd lease. A renewal sent at
// monotonic instant s whose reply grants ttl gives the right until s+ttl-margin on the
// node's own clock. Measured from the send, not the reply, the right ends no later than
// etcd could expire the lease (which it measures from the renewal's arrival), so no two
// hosts need to agree on the time; margin covers the two clocks running at different rates.
// It is safe for concurrent use.
type Liveness struct {
	clock  Clock
	margin time.Duration

	mu      sync.Mutex
	until   time.Duration // monotonic instant the right ends; valid only if ok
	ok      bool
	renewed chan struct{} // closed (and replaced) by every renewal that extends the right
}

// NewLiveness returns a Liveness on clock with no right to serve yet.
func NewLiveness(clock Clock, margin time.Duration) *Liveness {
	return &Liveness{clock: clock, margin: margin, renewed: make(chan struct{})}
}

// Renewals returns a channel closed by the next renewal that extends the right to serve.
// Take it before checking CanServe so no renewal is missed.
func (l *Liveness) Renewals() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

// Sending returns the instant a renewal is sent, to pass to Renewed with its reply.
func (l *Liveness) Sending() time.Duration { return l.clock.Mono() }

// Renewed records the reply to the renewal sent at sent: the lease now has ttl to live
// (ttl <= 0: the lease is gone, which ends the right at once). A late reply to an earlier
// renewal never shortens the right a later one gave.
func (l *Liveness) Renewed(sent, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ttl <= 0 {
		l.ok = false
		return
	}
	until := sent + ttl - l.margin
	if !l.ok || until > l.until {
		l.until, l.ok = until, true
		close(l.renewed)
		l.renewed = make(chan struct{})
	}
}

// Lost ends the right to serve at once (the lease is known to be gone).
func (l *Liveness) Lost() {
	l.mu.Lock()
	l.ok = false
	l.mu.Unlock()
}

// Remaining returns how long the right to serve lasts from now, 0 if it has ended.
func (l *Liveness) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ok {
		return 0
	}
	return max(l.until-l.clock.Mono(), 0)
}

// CanServe reports whether the node may serve now.
func (l *Liveness) CanServe() bool { return l.Remaining() > 0 }

// Until estimates on the wall clock when the right to serve ends, for people to read; it
// decides nothing.
func (l *Liveness) Until() time.Time { return l.clock.Wall().Add(l.Remaining()) }
