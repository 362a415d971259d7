package batch

import "fmt"

// Result is what a typed multi-key method returns: the merged response and each
// item's error.
type Result[Resp any] struct {
	// Response carries one result per item, in request order, and the newest map epoch
	// an answering node showed. An item that got no answer has the last status it met
	// (Unavailable if none).
	Response Resp
	// Errs has one entry per item: nil for an answered item, else its error (see
	// runtime.Batch.Errs).
	Errs []error
}

// Err returns item i's error: nil when it got an answer.
func (r *Result[Resp]) Err(i int) error {
	if i < 0 || i >= len(r.Errs) {
		return nil
	}
	return r.Errs[i]
}

// Error is the error of a multi-key call in which no item got an answer. It wraps each
// item's error, so errors.Is and errors.As find them.
type Error struct {
	// Op is the operation's name.
	Op string
	// Errs are the items' errors, in request order.
	Errs []error
}

// Error names the operation and the first item's error.
func (e *Error) Error() string {
	s := fmt.Sprintf("zaris: %s: none of %d items got an answer", e.Op, len(e.Errs))
	for _, err := range e.Errs {
		if err != nil {
			return s + ": " + err.Error()
		}
	}
	return s
}

// Unwrap returns the items' errors.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
