// Package middleware turns one attempt at a Zaris call into a call that absorbs ownership
// churn: it classifies each attempt's outcome, refreshes the cluster map when it is stale,
// backs off, bounds the call by attempts and by time, and returns answers unchanged.
//
// # Model
//
// A Handler handles one *runtime.Call; a Middleware wraps a Handler in one concern and is
// applied once, when a stack is built (Chain composes them, first listed outermost). The
// Call carries the state the layers share: the operation descriptor (read or write,
// idempotent, guards), the whole-call deadline, every attempt (node, map epoch, status or
// error, whether the request was sent, and its Class) and the call's stats (refreshes
// requested and performed, time in backoff). Each layer fills its part and reads the others'.
//
// The concerns, one file each:
//
//   - Classify (classify.go) is the only place that looks at statuses and raw errors. A
//     chain of small Classifiers, first definite answer wins, sorts every outcome into
//     Answer, Retry, RefreshRetry or Fatal (rules R1, R2, R3, R8), and rule B2 then makes a
//     failed write that may have been applied, on an operation that is neither idempotent
//     nor guarded, an error matching runtime.ErrInDoubt instead of a replay.
//   - RefreshOnMoved (refresh.go) asks the shared MapRefresher for one refresh before a
//     retry that follows a RefreshRetry outcome, and reports newer epochs seen in answers
//     (R2, R6, B1).
//   - Backoff (backoff.go) waits Delay before each retry (R5). In the default stack the
//     wait, and a multi-key call's, ends with runtime.ErrClosed when the client closes.
//   - Deadline (deadline.go) sets the whole-call deadline (R4).
//   - Retry (retry.go) is the attempt loop, bounded by attempts and by the deadline (R4, R7),
//     ending without an answer in a *runtime.CallError that names the bound and carries
//     every attempt (B4).
//   - Budget (budget.go) optionally caps retries to a share of calls (B3).
//   - Batches (batch.go) runs multi-key calls: it splits the items by owner, sends one
//     sub-request per owner in parallel through the retry layer as a single attempt, and
//     applies the rules above to the items that met churn only: one backoff and one map
//     refresh per round, both bounds, the slow factor of a status, B2 and R9 per item, and the
//     retry budget (B3) once per batch call and once per retried sub-request.
//
// Everything after Classify decides by the Class and by errors.Is and errors.As, never by
// an error's text.
//
// # The default stack
//
// Default builds the stack from a runtime.Config, in one function, in this order
// (outermost first); the generated zarisclient.Dial builds it with ForEngine, from the
// runtime options given to Dial:
//
//	call-level middleware      runtime.WithCallMiddleware: once per call, final outcome
//	Deadline
//	Batches                    multi-key calls only: per owner, one sub-request per round
//	Retry                      the attempt loop; per attempt:
//	    Budget                 runtime.WithRetryBudget only
//	    Backoff
//	    RefreshOnMoved
//	    Classify               DefaultClassifiers, or runtime.WithClassifiers
//	    attempt-level middleware   runtime.WithAttemptMiddleware: once per attempt, raw outcome
//	transport                  runtime.Engine.Invoke: one attempt on a pipelined or pooled connection
//
// User middleware plugs in at the two named places: in front of the retry layer (logging,
// tracing, metrics of calls) and behind it (per-attempt logging, fault injection). ForOps
// limits a middleware to some operations, named by their generated descriptors. The
// built-ins are exported, so a stack in another order is a Chain of them, given to the
// generated zarisclient.New. Handler, Middleware and Chain are defined in package runtime
// (so options can carry middleware) and aliased here.
//
// An attempt-level middleware can end a call before its attempt is sent by returning a
// *StopError; Budget and Backoff use it. The retry layer then drops the attempt that was
// never made and ends the call with the StopError's bound and its last outcome.
//
// # The attempt loop
//
// Retry makes attempts while both bounds of rule R4 allow, and acts on each attempt's
// Class. An Answer is returned with a nil error (unless a custom classifier called an
// error an answer, which is then returned as it is). Retry and RefreshRetry go on; the
// layers below wait and refresh. Fatal ends the call with a *runtime.CallError of Bound
// BoundNone, or BoundDeadline when the call's deadline ended it, also wrapping the
// context's error when the call's context ended during the attempt. A call out of attempts
// or time returns the last response, if any, and a *runtime.CallError naming the bound,
// with a copy of every attempt, the elapsed time, and the last cause (a
// *runtime.StatusError for a status) as Err (B4). An attempt left Unclassified (a stack
// without Classify) is an answer without an error and fatal with one.
//
// RefreshOnMoved refreshes just before the retry, after the backoff, rather than just
// after the failure: the refresh then sees the newest map the store has, and a call that
// will not be retried (out of attempts, time or budget) never waits for one. A Moved from a
// node with a newer map is already being fetched during the backoff (Observe), and the
// refresh before the retry joins that fetch or finds it done. Answer and Retry outcomes
// never cause a refresh any other way (R2, R8).
//
// # Rules
//
// The client's behaviour is a numbered set of rules; comments and tests throughout the
// module cite them by number, and this is where each is defined. R1 to R9 are the retry
// rules. The classes of the statuses in R1, R2, R5 and R8 are declared in the IDL, as
// annotations on the status enum (zaris.answer, zaris.retry, zaris.refresh,
// zaris.slow_backoff in idl/zaris.thrift); zarisgen turns them into the table every
// operation descriptor carries (runtime.Op.Statuses), and the middleware knows no status
// by name. The statuses named below are those of idl/zaris.thrift:
//
//   - R1 retry set: retry only Moved, ReplicaWriteRejected, Unavailable, Migrating and
//     OwnershipChanging; every other status is returned at once.
//   - R2 refresh set: before retrying Moved, ReplicaWriteRejected or OwnershipChanging,
//     refresh the cluster map (not for Unavailable or Migrating).
//   - R3 transport failures: node unavailable, partition unavailable (no owner in the
//     map), transport and protocol failures, socket and per-attempt timeout errors are
//     retried, each after a map refresh; any other error (the caller's context cancelled,
//     an application exception, a bug) is returned at once, never swallowed.
//   - R4 two bounds: attempts <= maxAttempts and now < deadline, whichever trips first.
//     Defaults: maxAttempts 3, backoff 100 ms, the deadline from ZARIS_REQUEST_TIMEOUT (60 s;
//     "infinite" disables it). maxAttempts 3 against an always-Moved node makes 3 attempts
//     and at most 3 refresh requests, not 60 s of them.
//   - R5 backoff: before attempt n+1 wait backoff*n; x8 when the last status was Migrating
//     (the factor zaris.slow_backoff declares);
//     capped at 2 s; clamped to the time left before the deadline (0 if none is left); a
//     cancelled context ends the sleep.
//   - R6 one refresh: concurrent refresh requests ride one in-flight refresh; a refresh
//     within 500 ms of the last completed one is a no-op; a caller waits at most
//     ZARIS_CLIENT_MAP_REFRESH_WAIT_MS (15000) and then goes on without cancelling the
//     refresh that others still wait for; clearing the shared slot never takes a lock that
//     a completion could convoy on; an older map never replaces a newer epoch.
//   - R7 off switch: ZARIS_DISABLE_RETRIES=true makes every call a single attempt.
//   - R8 answers: Conflict and NotFound are answers: returned at once, no retry, no refresh.
//   - R9 safe replays: retries are at-least-once; ifMatchVersion and ifAbsent make a
//     replayed write come back Conflict, which R8 hands to the caller.
//
// B1 to B6 are the rules beyond those:
//
//   - B1 epoch evidence: every response carries the answering node's map epoch
//     (mapEpoch); an answer whose epoch is newer than the client's map triggers a refresh
//     that skips R6's debounce (still one shared flight); without newer evidence, R6's
//     debounce holds.
//   - B2 in-doubt: a request that provably never left (dial refused, no pooled connection,
//     still queued on a pipelined connection, its context ended before it was written) is
//     always safe to retry; one written with no
//     reply is retried only for idempotent or guarded operations; a non-idempotent
//     unguarded operation returns an in-doubt error (errors.Is(err, runtime.ErrInDoubt)).
//   - B3 retry budget: an opt-in token bucket per client: retries capped to a fraction of
//     calls plus a floor per second (runtime.WithRetryBudget, NewRetryBudget).
//   - B4 terminal error: a call that runs out of attempts or time returns an error naming
//     the bound that tripped and each attempt's node, status or error, and map epoch
//     (runtime.CallError).
//   - B5 per-attempt timeout: a socket and attempt timeout distinct from the whole-call
//     deadline (runtime.WithAttemptTimeout, 5 s by default).
//   - B6 stalled owner: an attempt waiting on a node that a newer map no longer names as
//     its segment's owner ends as soon as the client installs that map (B1 evidence, a
//     refresh), with runtime.ErrOwnerMoved, and is retried at once (no backoff, no refresh)
//     when it was never sent, is idempotent or is guarded; a sent, unguarded,
//     non-idempotent one is in doubt (B2). A node that owes replies and has answered
//     nothing for 8 times its recent reply time (at least 200 ms, at most 1 s or the
//     attempt timeout) is suspected every 50 ms while it stays so; each suspicion asks for
//     one shared background map refresh under R6's debounce (at most one fetch per
//     500 ms), which asks the suspected node last. On a healthy cluster it costs a few
//     atomic updates per attempt and one look at each node's counters every 50 ms while
//     calls are in flight, and no fetch: a node that answers is never suspected.
//
// # Time
//
// The whole-call deadline lives on the call (Call.Deadline, set by Deadline), not on a
// derived context, so a call costs no timer: every layer that waits stops at it itself.
// Retry makes no attempt after it, Backoff clamps its sleep to it, RefreshOnMoved bounds
// its wait by it, and the transport puts it on the socket when it comes before the attempt
// timeout. Attempt-level middleware that waits should read Call.Deadline too.
//
// Every layer reads time and waits through the runtime.Clock it is given (cfg.Clock in
// Default), so the timing rules are tested with middlewaretest.Clock, exactly and without
// sleeping. The context's own deadline, which is on the wall clock, is carried over as the
// time remaining.
//
// # Concurrency
//
// A stack is built once and is safe for concurrent use by any number of calls, provided
// the transport, the MapRefresher and any added middleware are: the built-in layers keep no
// per-call state outside the Call, and a RetryBudget is shared safely. A Call belongs to
// one goroutine at a time; middleware may read and update it while it handles it, and must
// not keep it after returning.
package middleware
