// Package middleware turns one attempt at a call into a call that absorbs ownership churn:
// it classifies each attempt's outcome, refreshes the cluster map when it is stale, backs
// off, bounds the call by attempts and by time, and returns answers unchanged.
//
// Start with Default (or ForEngine), the stack the generated zarisclient.Dial builds. A
// Handler handles one *runtime.Call; a Middleware wraps a Handler in one concern, one file
// each (classify.go, refresh.go, backoff.go, deadline.go, retry.go, budget.go, batch.go).
// The Call carries what the layers share: the operation descriptor, the whole-call
// deadline, every attempt with its Class, and the call's stats. Everything after Classify
// decides by the Class and by errors.Is and errors.As, never by an error's text. README.md
// in this directory explains the design: the model, the attempt loop, time.
//
// A stack is safe for concurrent use when its transport, MapRefresher and added middleware
// are; a Call belongs to one goroutine at a time, and no layer may keep it, or a pointer
// into it, after its handler returns: a client made by zarisclient.Dial reuses its Calls.
//
// # The default stack
//
// Outermost first (TestDefaultStackDiagramIsTheOrderBuilt holds the code to it):
//
//	call-level middleware      runtime.WithCallMiddleware: once per call, final outcome
//	Deadline                   the whole-call deadline (R4)
//	Batches                    multi-key calls only: per owner, one sub-request per round
//	Retry                      the attempt loop, bounded by attempts and time (R4, R7, B4); per attempt:
//	    Budget                 runtime.WithRetryBudget only (B3)
//	    Backoff                the wait before a retry (R5)
//	    RefreshOnMoved         one shared map refresh before a retry that needs it (R2, R6, B1, B7)
//	    Classify               status or error -> answer, retry, refresh-retry or fatal (R1-R3, R8, B2)
//	    attempt-level middleware   runtime.WithAttemptMiddleware: once per attempt, raw outcome
//	transport                  runtime.Engine.Invoke: one attempt on a pipelined or pooled connection
//
// User middleware plugs in at the two named places; ForOps limits one to some operations.
// The built-ins are exported, so a stack in another order is a Chain of them, given to the
// generated zarisclient.New. An attempt-level middleware ends a call before its attempt is
// sent by returning a *StopError.
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
// B1 to B8 are the rules beyond those:
//
//   - B1 epoch evidence: every response carries the answering node's map epoch
//     (mapEpoch); an answer whose epoch is newer than the client's map triggers a refresh
//     that skips R6's debounce (still one shared flight); without newer evidence, R6's
//     debounce holds.
//   - B2 in-doubt: a request that provably never left (dial refused, no pooled connection,
//     still queued on a pipelined connection, its context ended before it was written) is
//     always safe to retry; one written with no
//     reply is retried only for idempotent or guarded operations, or under B8; a
//     non-idempotent unguarded operation returns an in-doubt error (errors.Is(err,
//     runtime.ErrInDoubt)).
//   - B3 retry budget: an opt-in token bucket per client: retries capped to a fraction of
//     calls plus a floor per second (runtime.WithRetryBudget, NewTokenBudget).
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
//     500 ms), which asks the suspected node last. A map fetch asks the next node once the
//     one asked has been silent past its threshold, so a stalled node costs a refresh no
//     more than that. On a healthy cluster it costs a few
//     atomic updates per attempt and one look at each node's counters every 50 ms while
//     calls are in flight, and no fetch: a node that answers is never suspected.
//   - B7 no churn evidence is lost: a refresh request carries the time of its evidence (the
//     end of the attempt that asked for it, clustermap.Evidence); a completed fetch satisfies
//     only the requests whose evidence is no newer than its start, and one that R6's
//     debounce holds back is deferred, not dropped: a fetch runs at the end of the window
//     for all of them (the caller does not wait for it). And once an owner cannot be reached
//     at all (Unreachable: the dial refused or timed out, no connection free in time, or no
//     reply within the attempt timeout; a reset or EOF on an open connection alone is not
//     that), the next attempt waits until the client's map names another owner for the key's
//     segment (at once if it already does), riding the fetches it shares with every waiting
//     caller, one per debounce window. The wait stands in for the backoff and is no attempt;
//     nor is an attempt that never left because its owner could not be reached (a refused
//     dial) when the wait follows it (Uncounted), so a call whose earlier attempts met Moved
//     or a reset still reaches the new owner; a call limited to one attempt stays one. The
//     wait is bounded by the deadline and by RetryPolicy.OwnerWait (5 s, the default attempt
//     timeout) from the call's first such failure; past it the call backs off and refreshes
//     as before. So a dead owner costs the store's failover plus at most one debounce window
//     (500 ms), however its death looks on the wire. R4 (always Moved: 3 attempts, at most 3
//     refresh requests, about 300 ms) and the Unavailable storm are unchanged; a multi-key
//     call applies B7 per item between rounds. On a healthy cluster it costs no clock
//     reading per call (an attempt's end is its start plus its duration) and no allocation
//     more; a call allocates 64 bytes more (the attempt's end time, the wait's counters).
//   - B8 exactly once: a non-idempotent operation whose IDL names a request-token field
//     (zaris.dedup; Increment's token) carries a token the typed client sets once per call,
//     a random client id and the call's number (runtime.Tokens), the same on every attempt
//     and never reused; a request that already carries one keeps it. A store whose map
//     advertises a dedup window (dedupWindowMs; the reference store keeps 10 minutes) keeps
//     each tokened write's outcome with the write (replicated before the acknowledgement,
//     copied with the segment, kept by a new owner) and answers a replay with the first
//     outcome, changing nothing. So a sent, unanswered tokened attempt is replayed (B2's
//     in-doubt line moves): wherever the map says, as any retry, and only within the
//     window counted from the start of the call's first attempt (a replay's attempt ends
//     where the window does; none starts past it), far beyond the 60 s deadline. Without a
//     window in the map (an older store, another server) B2 holds as before: in doubt. A
//     tokened call costs 26 bytes more on the wire (binary protocol) and, unless it carries
//     its own token, a copy of its request (the caller's is not modified).
package middleware
