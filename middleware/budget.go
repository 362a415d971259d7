package middleware

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
)

// BudgetPolicy holds the numbers of a retry budget (rule B3). Start from
// DefaultBudgetPolicy and change what you need; every field is taken literally.
type BudgetPolicy struct {
	// Ratio is the tokens each call deposits; a retry (any attempt after a call's first)
	// takes one token. Ratio 0.2 lets retries add at most 20% to the calls. In [0, 1].
	Ratio float64
	// MinPerSecond is the floor: retries allowed per second whatever the call rate, so a
	// client with little traffic can still retry. Up to one second's worth is kept. Finite,
	// >= 0.
	MinPerSecond float64
	// MaxBanked caps the tokens calls can bank, so a long healthy spell does not buy an
	// unbounded burst of retries in the next outage. >= 0, below 2^63 thousandths.
	MaxBanked float64
}

// DefaultBudgetPolicy is Finagle's budget: retries add at most 20% to the calls, plus 10
// retries per second, with at most 100 tokens banked.
var DefaultBudgetPolicy = BudgetPolicy{Ratio: 0.2, MinPerSecond: 10, MaxBanked: 100}

// TokenBudget is a token bucket shared by all the calls of one client (rule B3): each call
// deposits BudgetPolicy.Ratio tokens, and each retry takes one from them or from the floor
// of MinPerSecond per second, measured on the injected clock. When both are empty, a call
// that wanted to retry ends with its last outcome instead, so an outage cannot multiply the
// load on the store. It is the built-in runtime.RetryBudget (runtime.WithRetryBudget).
// Build one with NewTokenBudget; the zero value allows no retries. A TokenBudget is safe
// for concurrent use; a call that is not retried takes no lock.
type TokenBudget struct {
	policy    BudgetPolicy
	clock     clock.Clock
	maxBanked int64 // MaxBanked in thousandths of a token
	deposit   int64 // Ratio in thousandths of a token

	banked atomic.Int64 // thousandths of a token deposited by calls, at most maxBanked

	mu       sync.Mutex // protects floor and refilled
	floor    float64    // tokens of the per-second floor, at most MinPerSecond
	refilled time.Time  // when floor was last refilled
}

// NewTokenBudget returns a budget with policy p, reading time on clock (clock.System
// when nil). Its floor starts full; nothing is banked. It returns an error naming the field
// when p is out of range.
func NewTokenBudget(p BudgetPolicy, clock clock.Clock) (*TokenBudget, error) {
	// Written so that NaN, which every comparison rejects, fails each check.
	switch {
	case !(p.Ratio >= 0 && p.Ratio <= 1):
		return nil, fmt.Errorf("middleware: retry budget Ratio %v is not in [0, 1]", p.Ratio)
	case !(p.MinPerSecond >= 0 && p.MinPerSecond <= math.MaxFloat64):
		return nil, fmt.Errorf("middleware: retry budget MinPerSecond %v is not a finite number >= 0", p.MinPerSecond)
	case !(p.MaxBanked >= 0 && p.MaxBanked*1000 < math.MaxInt64):
		return nil, fmt.Errorf("middleware: retry budget MaxBanked %v is not a number in [0, %.0f)", p.MaxBanked, math.MaxInt64/1000.0)
	}
	clock = orSystem(clock)
	return &TokenBudget{
		policy:    p,
		clock:     clock,
		floor:     p.MinPerSecond,
		refilled:  clock.Now(),
		maxBanked: int64(p.MaxBanked * 1000),
		deposit:   int64(p.Ratio * 1000),
	}, nil
}

// Deposit records one call: it banks Ratio tokens, up to MaxBanked.
func (b *TokenBudget) Deposit() {
	if b.deposit == 0 {
		return
	}
	for {
		old := b.banked.Load()
		if old >= b.maxBanked {
			return
		}
		if b.banked.CompareAndSwap(old, min(old+b.deposit, b.maxBanked)) {
			return
		}
	}
}

// Withdraw takes one token for a retry and reports whether there was one: first from the
// tokens calls banked, then from the per-second floor.
func (b *TokenBudget) Withdraw() bool {
	for {
		old := b.banked.Load()
		if old < 1000 {
			break
		}
		if b.banked.CompareAndSwap(old, old-1000) {
			return true
		}
	}
	if b.policy.MinPerSecond <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if elapsed := now.Sub(b.refilled); elapsed > 0 {
		b.floor = min(b.floor+elapsed.Seconds()*b.policy.MinPerSecond, b.policy.MinPerSecond)
		b.refilled = now
	}
	if b.floor >= 1 {
		b.floor--
		return true
	}
	return false
}

// Budget returns the attempt-level middleware that charges the calls it sees to b: a
// call's first attempt deposits, every later attempt withdraws, and when b is empty the
// attempt is not made: Budget returns a *StopError with runtime.BoundBudget and
// runtime.ErrRetryBudgetExhausted, and the retry layer ends the call with its last outcome.
// It goes outermost among the attempt-level layers, so an attempt refused by the budget
// neither backs off nor refreshes the map. A sub-request of a multi-key call (call.Parent
// set) passes through: the batch layer charges the batch (see Batches).
func Budget(b runtime.RetryBudget) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			if call.Parent != nil {
				return next(ctx, call)
			}
			if len(call.Attempts) <= 1 {
				b.Deposit()
			} else if !b.Withdraw() {
				return nil, &StopError{Bound: runtime.BoundBudget, Err: runtime.ErrRetryBudgetExhausted}
			}
			return next(ctx, call)
		}
	}
}
