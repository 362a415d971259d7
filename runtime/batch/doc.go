// Package batch runs the multi-key operations of a typed client (MultiGet, MultiPut,
// MultiDelete in the Zaris IDL). zarisgen describes each one with a Spec: how to read the
// items of its request, build a sub-request from some of them, and read the per-item
// results of a sub-response. Run checks a request's items, builds the multi-key
// runtime.Call that carries them (runtime.Batch, through runtime.BatchItems) and hands it
// to the client's stack, whose batch layer splits it by owner and retries only the items
// that met churn; it returns each item's result and error (Result), and an *Error when no
// item got an answer.
//
// The package is for generated code and for the errors a program checks: a multi-key
// method's result is a Result, its error an *Error or one matching runtime.ErrInvalidBatch.
package batch
