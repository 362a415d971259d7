// Package runtime is the Zaris client's engine: configuration, the cluster map and key
// routing, per-node connection pools over every supported Thrift protocol and transport,
// the shared map refresher, the call model the middleware works on, and the typed errors.
// The middleware package decides what to do with an attempt's outcome (classify, refresh,
// back off, retry); this package makes attempts and records the facts. The rules cited by
// number (R1 to R9, B1 to B6) are defined in the Rules section of the middleware package's
// documentation. Most programs use neither package directly: the generated
// zarisclient.Dial builds an Engine and the default stack from runtime options.
//
// # Configuration
//
// NewConfig (and Dial, which calls it) builds a Config in one place: the defaults
// (DefaultRetryPolicy and the Default constants), then the environment
// (ZARIS_REQUEST_TIMEOUT, ZARIS_DISABLE_RETRIES, ZARIS_CLIENT_MAP_REFRESH_WAIT_MS,
// ZARIS_PIPELINE), then the options in order, then validation. An explicit option beats
// the environment, which beats the default; ZARIS_DISABLE_RETRIES=true wins over
// everything (rule R7). A value that does not parse, or makes no sense, is a *ConfigError
// naming the variable or field and the value.
// The Config also carries the parts of the middleware stack a user chooses (call-level
// and attempt-level middleware, a retry budget, classifiers), which middleware.Default
// reads, so one option type configures the whole client. A per-call CallOption is not an
// Option.
//
// # The map and routing
//
// A node serves a cluster map: an epoch, a segment count, the nodes, and each segment's
// active owner. A key's segment is Segment(key, segmentCount), CRC-32 (IEEE) modulo the
// count, the same function the store places data with. NewRoutingTable validates a map and
// builds an immutable RoutingTable; a Router holds the current one behind an atomic pointer,
// so routing a key is one atomic load and two slice lookups, with no lock and no allocation.
// Router.Install only ever moves to a newer epoch: a slow fetch or a lagging node cannot
// bring an old map back. A segment with no owner routes to a *PartitionError, which is
// ErrPartitionUnavailable.
//
// # Connections
//
// A generated Thrift client carries one request at a time, so each node has a bounded pool
// of connections (Config.PoolSize), each with its own generated client. A call borrows an
// idle connection, or dials one while the pool is under its cap, or waits for one to come
// back, all within the attempt timeout. A connection that saw any error is closed, never
// reused. When a refresh installs a map without a node, that node's pool is closed; Close
// closes every connection. The built-in Dialer (DefaultDialer) speaks binary, compact, JSON
// or header over framed or buffered transport, with TLS when configured, on a buffered
// socket; replace it with WithDialer. The attempt timeout (or the call's deadline,
// Call.Deadline, when it comes first) and the caller's cancellation are enforced on the
// socket, because the generated code does not watch its context and the Thrift protocols
// retry a timed-out read while their context has time left. A call's deadline is put on the
// socket exactly; the attempt timeout may fire up to 1/64 of it (at most 10 ms) late, so
// that a busy connection's socket deadline moves once in that time rather than on every call.
// Over framed binary, the default, a reply is read whole and decoded from memory, and the
// values in it (a MultiGet's, say) share one allocation: a value kept keeps the bytes of the
// values after it in that reply alive.
//
// # Pipelined connections
//
// By default the calls to one node that are in flight together share a few connections
// (Pipelining.Conns); WithPipelining(false) or ZARIS_PIPELINE=false turns this off. A call
// encodes its request with a protocol of its own into a buffer and queues it. On an idle
// connection the call writes it itself if it fits in a socket buffer (16 KiB), so that no
// caller is held by a write the node does not take in; behind requests written and
// unanswered, or when larger, it leaves the write to the connection's writer goroutine,
// which lets the callers woken by the same replies queue theirs first and sends everything
// queued in one write. The connection's reader goroutine reads the replies in order, checks
// each one's seqid and method against the oldest request written, and decodes it into that
// call's result. This is plain Thrift on the wire: a Thrift server answers a connection's
// requests in order. A reply out of order, one for a request never sent, one cut short or
// one that cannot be read (a frame over the size limit) fails that connection at once, and
// only it. A request still queued when its attempt ends (the caller's context, the attempt
// timeout) is never written: the attempt is not sent, so it may be retried whatever the
// operation (rule B2). One written and not answered is in doubt; the caller leaves at once,
// and the reply, when it comes, is read and dropped on a connection that stays in use,
// unless the node seems dead: when a call's attempt timeout passes with no reply at all on
// its connection since its request was written, the connection is closed once it has given
// no reply for a whole attempt timeout since that write (an attempt may spend part of its
// timeout dialing or queued), and every call in flight on it fails with ErrTransport. So
// does a node that takes no write for a whole attempt timeout; a node that dies fails all
// its calls at once. A request whose deadline passed while it was queued is dropped
// unwritten. A pipelined call waits on its reply and its context alone: while callers wait
// on a connection, its sweep ends the calls past their attempt timeout every 1/64 of it (at
// least 1 ms, at most 10 ms), so the attempt timeout may fire up to that late, as on a
// pooled connection. A call's own deadline that its context does not carry is kept exactly,
// by a timer. When every open connection carries 8 calls or more, a call dials one more
// into a free slot, and goes on the least busy open one if that dial fails. A call that
// finds no other call to its node in flight takes a pooled connection, since sharing would
// only add hand-offs between goroutines. Pipelining needs the built-in dialer; with
// WithDialer the pool carries every call. tools/zarisbench measures both modes; its README
// has the numbers the default was chosen by.
//
// # A stalled owner
//
// Rule B6 (ownerwatch.go, suspect.go): every install of a newer map closes a channel that
// pipelined callers wait on beside their reply, and closes the pooled connections (of the
// built-in dialer) whose call in flight is for a segment the map moved to another node;
// either attempt ends with ErrOwnerMoved, sent or not as the request went. Each attempt
// also counts as a reply its node owes; a goroutine looks at the counts every 50 ms while
// any are owed, and a node silent past its threshold asks the refresher for a background
// refresh, debounced as any other (R6), in which the map is asked of it last.
//
// # The refresher
//
// A Refresher fetches a new map on request under rules R6 and B1: all concurrent requests
// ride one fetch (golang.org/x/sync/singleflight); a request within the debounce window of
// the last completed fetch is a no-op unless an answer showed a newer epoch; each caller
// waits at most the refresh wait or its own context while the fetch, which runs on the
// refresher's own context, completes for the others. The Engine's refresher asks the nodes
// of the current map, then the seeds, and takes the first map at least as new as the epoch
// an answer showed (nodes learn a map one by one), else the newest it got. The bootstrap
// fetch in Dial is not a refresh: it opens no debounce window.
//
// No lock of the Refresher's is held while a fetch runs or while callers wait. The flight
// clears its own singleflight slot with Forget as soon as the map is installed; Forget and
// singleflight's completion take only singleflight's internal mutex, held for a map delete
// and for handing results to buffered channels, so a completion never convoys behind a
// waiter or a new request, nor the other way round. A failed fetch opens no debounce
// window; a fetch runs on the refresher's own context, bounded by the refresh wait (at
// least a dial plus an attempt timeout), never on a caller's.
//
// # Calls and errors
//
// The typed client makes a Call per application call; the middleware adds Attempts to it;
// Engine.Invoke, the end of the chain, routes one attempt, sends it and records the node,
// the map epoch, whether the request may have been sent, and the answer's status and epoch
// or the error. An attempt whose context has ended by the time it would write (before it
// starts, or while it waits for a connection) sends nothing and returns the context's
// error. Any status comes back as a response with a nil error. Errors carry a
// sentinel kind for errors.Is: ErrPartitionUnavailable (no owner: not sent),
// ErrNodeUnavailable (no connection: the dial failed, the node left the map, or none was
// free within the attempt timeout; not sent), ErrTransport (a Thrift transport or protocol
// failure: sent, unless the request was still queued on a pipelined connection that
// failed; Attempt.Sent says which), ErrAttemptTimeout (the per-attempt timeout, rule B5:
// sent, unless the request was still queued on a pipelined connection),
// ErrRequestTooLarge (the request's encoding is over the client's message limit: not
// sent, not retried), ErrOwnerMoved (a newer map moved the segment away while the attempt
// waited, rule B6: sent or not), ErrClosed.
// Any error closes the pooled connection it happened on; a pipelined connection is closed
// only by a failure of the connection itself (see above), so an application exception or
// a caller that left early leaves it in use. An error the client does
// not judge (the caller's context ended, an application exception) is wrapped without a
// kind, so errors.Is(err, context.Canceled) and errors.As(err, &thrift.TApplicationException)
// still work. Transport failures are told apart by type, never by message.
//
// # Multi-key calls
//
// A multi-key operation (MultiGet, MultiPut, MultiDelete) carries a list of items and
// answers one status per item. Its typed method fills a BatchSpec and calls RunBatch, which
// refuses an empty batch or one over MaxBatchItems (ErrInvalidBatch), answers an item
// without a key InvalidRequest without sending it, and runs one Call carrying a Batch
// through the stack. The batch layer of the middleware splits the items by owner, sends one
// sub-request per owner (each a Call of its own, one attempt), and retries only the items
// whose status is churn; answers are final per item. The result is a BatchResult: the
// merged response with one result per item in request order, and each item's error (a
// *CallError with the item's own attempts). The call's error is a *BatchError only when no
// item got an answer. A batch is not atomic across items.
//
// One owner's items go in one request, or in several when their keys and values add up to
// more than the batch layer's bound (1 MiB, middleware.BatchMaxBytes), so a MultiPut of
// large values fits a node's message limit (the reference store's is 4 MiB each way by
// default). A node refuses to send a reply over its limit by closing the connection: the
// sub-request fails with ErrTransport, and its items are sent again in sub-requests of half
// as many items, each a retry of its items (so within their attempts: with 3, a MultiGet
// whose reply is up to about four times the limit is read). A larger one fails on those
// items. On a pipelined connection the node's close also fails the other calls in flight on
// it, which the rules then handle like any transport failure (an unguarded Increment among
// them is reported in doubt).
//
// # Concurrency
//
// Engine, Router, RoutingTable and Refresher are safe for concurrent use; a Call belongs to
// one goroutine at a time. Time is read through Config.Clock (debounce, refresh wait,
// attempt durations), so tests inject a fake clock; socket deadlines are wall-clock time.
package runtime
