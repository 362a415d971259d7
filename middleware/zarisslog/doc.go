// Package zarisslog logs Zaris calls through log/slog.
//
// # Model
//
// Middleware returns a call-level middleware (install it with
// runtime.WithCallMiddleware): it runs once per call, in front of the retry layer, so it
// sees the call's final outcome and its whole attempt history. It writes one structured
// line per call that needed more than one attempt or got no answer, and nothing for a call
// answered at its first attempt, so a healthy service's log stays quiet while ownership
// churn, and what the client did about it, shows up. WithAlways logs every call.
//
// An answer is any status the application sees (Ok, NotFound, Conflict, InvalidRequest): a
// NotFound at the first attempt is the happy path too. A call that got no answer ended in
// an error, normally a *runtime.CallError.
//
// # The line
//
// The message is "zaris call" (one attempt), "zaris call retried" (answered after more
// than one attempt) or "zaris call failed" (no answer). The attributes, under the
// logger's own groups if it has any:
//
//	op             the operation, for example "Put"
//	key            the routing key (omitted with WithoutKeys)
//	status         the answer's status, when there is one
//	error          the error's text, when the call failed
//	bound          what stopped a failed call: maxAttempts, deadline, retry budget or none
//	elapsed        the call's time
//	refreshes      group: requested, performed (map refreshes the call caused)
//	backoff        the time spent waiting between attempts
//	attempts       group, one group per attempt keyed by its number ("1", "2", ...):
//	    node         the node it was routed to (absent when none was chosen)
//	    addr         that node's address
//	    map_epoch    the epoch of the client's map it was routed with
//	    status       the node's answer, and answer_epoch, the node's own map epoch
//	    error        the error, when no answer came back, and sent, whether the request
//	                 may have reached the node
//	    class        how the client judged it: answer, retry, refresh-retry or fatal
//	    duration     the attempt's time on the wire
//
// With slog's JSON handler (which writes durations in nanoseconds) a Get that met a node
// that no longer owned its key reads:
//
//	{"level":"INFO","msg":"zaris call retried","op":"Get","key":"user:43","status":"NotFound",
//	 "elapsed":101000000,"refreshes":{"requested":1,"performed":1},"backoff":100000000,
//	 "attempts":{"1":{"node":2,"addr":"10.0.0.2:7001","map_epoch":6,"status":"Moved",
//	 "answer_epoch":7,"class":"refresh-retry","duration":400000},
//	 "2":{"node":1,"addr":"10.0.0.1:7001","map_epoch":7,"status":"NotFound",
//	 "answer_epoch":7,"class":"answer","duration":350000}}}
//
// # Levels and cost
//
// Levels holds the level of each kind of line (DefaultLevels: Debug, Info, Warn). The
// middleware asks the logger whether the level is enabled before it builds any attribute,
// so a call that is not logged costs one comparison. The context is passed to the
// handler, so a handler that reads trace ids from it can add them.
//
// # Concurrency
//
// The middleware is safe for concurrent use when the logger's handler is (slog's are).
package zarisslog
