package store

import (
	"sync"
	"time"
)

// writeLock is a mutex whose taker can give up waiting for it (lockUnless). The zero
// value is unlocked.
type writeLock struct {
	mu   sync.Mutex
	held bool
	free chan struct{} // closed by the Unlock that ends the current hold
}

// lockUnless waits for the lock and takes it, unless stop or done is closed (or receives)
// first; it reports whether it took the lock.
func (l *writeLock) lockUnless(stop <-chan time.Time, done <-chan struct{}) bool {
	for {
		l.mu.Lock()
		if !l.held {
			l.held, l.free = true, make(chan struct{})
			l.mu.Unlock()
			return true
		}
		free := l.free
		l.mu.Unlock()
		select {
		case <-free:
		case <-stop:
			return false
		case <-done:
			return false
		}
	}
}

// Unlock releases the lock.
func (l *writeLock) Unlock() {
	l.mu.Lock()
	l.held = false
	close(l.free)
	l.mu.Unlock()
}
