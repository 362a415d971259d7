package runtime

import (
	"errors"
	"time"
)

// errSwept is the outcome of a pipelined call whose attempt reached its deadline before its
// reply: the sweep, or a flush, ended it (see pipeConn.sweep).
var errSwept = errors.New("zaris: pipelined attempt reached its deadline")

// sweepInterval is how often a pipelined connection's sweep runs for the attempt timeout
// t: 1/64 of it, at least 1 ms and at most 10 ms, which is how late, at most, a pipelined
// attempt ends past its attempt timeout.
func sweepInterval(t time.Duration) time.Duration {
	return max(lateAttemptTimeout(t), time.Millisecond)
}

// startSweep starts the connection's sweep goroutine unless it is running; c.mu is held
// and c.err is nil.
func (c *pipeConn) startSweep() {
	if c.sweeping {
		return
	}
	c.sweeping = true
	c.wg.Add(1)
	go c.sweepLoop()
}

// sweepLoop sweeps the connection every sweepEvery while a caller waits on it, and ends
// when none does or the connection fails.
func (c *pipeConn) sweepLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if !c.sweep(time.Now()) {
				return
			}
		}
	}
}

// sweep ends, as of now, the attempt of every call on the connection whose deadline has
// passed: one still queued is dropped unwritten; one written, even one whose reply is being
// read, is left to its reply, which is read and dropped. Its caller is told either way. A
// written request whose attempt timeout passed with no reply at all on the connection
// since it was written is watched: once the connection has given no reply for a whole
// attempt timeout since that write, it fails (errNoReply). sweep reports whether a caller
// still waits on the connection or a silence is watched; when neither (the requests of
// callers that left may still be in flight), the sweep goroutine ends, and the next call
// queued starts another.
func (c *pipeConn) sweep(now time.Time) bool {
	c.mu.Lock()
	if c.replies.Load() != c.quiet.mark {
		c.quiet.since = time.Time{} // a reply came: the silence watched is over
	}
	if c.waiting.Load() == 0 && c.quiet.since.IsZero() || c.err != nil {
		c.sweeping = false
		c.mu.Unlock()
		return false
	}
	for _, p := range c.queue {
		if !now.Before(p.deadline) {
			p.endAttempt(stQueued, stExpired, false, errSwept) // the flush that takes it counts it out
		}
	}
	for _, p := range c.inflight[c.head:] {
		if !now.Before(p.deadline) && p.endAttempt(stWritten, stSwept, true, errSwept) {
			c.watchSilence(p)
		}
	}
	// The reply the reader is reading may have stopped halfway: its caller is told too,
	// and the reader then drops the reply. The reader claims a call, and sets readingEnd,
	// under mu only, so readingEnd is the deadline of whichever call this takes.
	if !now.Before(c.readingEnd) {
		if p := c.reading.Swap(nil); p != nil && p.endAttempt(stReading, stSwept, true, errSwept) {
			c.watchSilence(p)
		}
	}
	silent := !c.quiet.since.IsZero() && c.replies.Load() == c.quiet.mark && !now.Before(c.quiet.since.Add(c.attemptTimeout))
	c.mu.Unlock()
	if silent {
		c.fail(errNoReply)
	}
	return true
}

// watchSilence starts watching the connection's silence since p was written if p's
// attempt timeout (not a call's own deadline) has just passed with no reply at all on the
// connection since then. c.mu is held.
func (c *pipeConn) watchSilence(p *pcall) {
	if !p.callBound {
		c.watchQuiet(p)
	}
}

// watchQuiet starts watching the connection's silence since p, written, was written,
// unless a reply came since. c.mu is held.
func (c *pipeConn) watchQuiet(p *pcall) {
	if c.replies.Load() != p.mark {
		return
	}
	if c.quiet.since.IsZero() || p.written.Before(c.quiet.since) {
		c.quiet.mark, c.quiet.since = p.mark, p.written
	}
}

// endAttempt ends p's attempt for cause (errSwept: its deadline; errOwnerMoved: rule B6)
// if p is in state from: it moves p to state to and tells its caller, with sent saying
// whether the request was written. It reports whether it did.
func (p *pcall) endAttempt(from, to int32, sent bool, cause error) bool {
	if !p.state.CompareAndSwap(from, to) {
		return false
	}
	p.err, p.sent = cause, sent
	p.done <- struct{}{}
	return true
}
