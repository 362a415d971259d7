package middleware

import "github.com/clustron/zaris-go/runtime"

// StopError is returned by an attempt-level middleware that decides, before the current
// attempt is sent, that the call must end (the retry budget is empty, the deadline passed
// during the backoff, the context ended during a wait). The retry layer drops the attempt
// that was never made from call.Attempts and ends the call with a *runtime.CallError whose
// Bound is Bound and whose Err wraps Err and the last attempt's cause.
type StopError struct {
	// Bound is the bound that stopped the call (runtime.BoundNone for a cancelled context).
	Bound runtime.Bound
	// Err is why, if there is more to say than the bound (for example
	// runtime.ErrRetryBudgetExhausted or context.Canceled); it may be nil.
	Err error
}

// Error names the bound and the reason.
func (e *StopError) Error() string {
	if e.Err == nil {
		return "zaris: call stopped by its " + e.Bound.String() + " bound"
	}
	return "zaris: call stopped: " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *StopError) Unwrap() error { return e.Err }
