package runtime

import "context"

// Outcome is what one attempt produced, as a Classifier sees it.
type Outcome struct {
	// Ctx is the call's context (with the call's deadline), not the transport's per-attempt one.
	Ctx context.Context
	// Call is the call; Call.Op says what the operation is.
	Call *Call
	// Attempt is the attempt being judged (Call.Current()), as the transport filled it.
	Attempt *Attempt
	// Response is the response, set when the node answered.
	Response Response
	// Err is the transport's error, set when no response arrived.
	Err error
}

// Classifier judges one attempt's outcome: it returns the class and true when it knows
// the answer, or false to leave the outcome to the next classifier in the chain, where the
// first definite answer wins.
type Classifier func(o Outcome) (class Class, decided bool)
