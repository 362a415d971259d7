package runtime

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// Token names one call of a non-idempotent operation that carries a request token (the
// IDL's zaris.dedup, Op.TokenField): a random client id and the call's number. The typed
// client sets it once per call, the same on every attempt, so a store that keeps outcomes
// answers a replay with the first one (rule B8). The zero Token is none.
type Token struct {
	Client   int64
	Sequence int64
}

// IsZero reports whether t is no token.
func (t Token) IsZero() bool { return t == Token{} }

// Tokens hands out the tokens of one client's calls: its client id, random and never 0,
// and a sequence from 1 that never repeats. It is safe for concurrent use.
type Tokens struct {
	client int64
	seq    atomic.Int64
}

// NewTokens returns a token source with a new random client id, from crypto/rand.
func NewTokens() *Tokens {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails: it fills b or crashes the program
		if id := int64(binary.LittleEndian.Uint64(b[:])); id != 0 {
			return &Tokens{client: id}
		}
	}
}

// Next returns the token of a new call.
func (t *Tokens) Next() Token { return Token{Client: t.client, Sequence: t.seq.Add(1)} }

// replayBound applies rule B8 to an attempt of a tokened call: it records the window the
// current map advertises on a, and when an earlier attempt may have been applied (sent and
// unanswered), so this one is a replay, it returns the time left until the window ends,
// counted from the start of the call's first attempt (so before the store can have
// forgotten the first outcome), which ends this attempt; when no window is left it returns
// an in-doubt error and the attempt is not sent. now is the attempt's start on the Clock.
func (c *Engine) replayBound(call *Call, a *Attempt, now time.Time) (left time.Duration, replay bool, err error) {
	var w time.Duration
	if t := c.router.Table(); t != nil {
		w = t.dedupWindow
	}
	a.DedupWindow = w
	if call.replay.from.IsZero() {
		call.replay.from, call.replay.window = now, w
	}
	call.replay.window = min(call.replay.window, w)
	if !call.mayHaveApplied() {
		return 0, false, nil
	}
	left = call.replay.from.Add(call.replay.window).Sub(now)
	if call.replay.window <= 0 || left <= 0 {
		return 0, true, &replayError{op: call.Op.Name, window: call.replay.window}
	}
	return left, true, nil
}

// replayWindow is what rule B8 keeps of a tokened call: when its first attempt started and
// the shortest dedup window any of its attempts' maps advertised.
type replayWindow struct {
	from   time.Time // on the engine's Clock
	window time.Duration
}

// mayHaveApplied reports whether an attempt before the current one was sent and got no
// reply, so the store may have applied it.
func (c *Call) mayHaveApplied() bool {
	for _, a := range c.Earlier() {
		if a.Sent && !a.Answered {
			return true
		}
	}
	return false
}

// replayError is the error of a tokened call whose earlier attempt may have been applied
// and whose replay could no longer reach the store within its dedup window (or whose map
// advertises none any more). It wraps ErrInDoubt; the attempt was not sent.
type replayError struct {
	op     string
	window time.Duration
}

func (e *replayError) Error() string {
	if e.window <= 0 {
		return fmt.Sprintf("%v: %s was sent and no reply came back, and the cluster map advertises no dedup window, so it is not replayed", ErrInDoubt, e.op)
	}
	return fmt.Sprintf("%v: %s was sent and no reply came back, and its store's %v dedup window has passed since the call began, so it is not replayed", ErrInDoubt, e.op, e.window)
}

func (e *replayError) Unwrap() error { return ErrInDoubt }
