// Package runtime is the client's engine: configuration, key routing, connections to the
// nodes (pooled or pipelined, over every supported Thrift protocol and transport), the
// shared map refresher, the call model the middleware works on, and the typed errors. The
// middleware package decides what to do with an attempt's outcome; this package makes
// attempts and records the facts. Most programs use neither directly: the generated
// zarisclient.Dial builds an Engine and the default stack from runtime options.
//
// Three packages below it hold what the engine, the middleware, the generated code and
// the store share without needing the engine: clock (the source of time every timing rule
// reads), clustermap (the cluster map, a key's segment and route, and the vocabulary of
// refreshing the map) and batch (a typed client's multi-key calls).
//
// # For users
//
// A program passes Option values to zarisclient.Dial: WithSeeds and the other With…
// functions, over defaults (DefaultPoolSize, DefaultPipelineConns, DefaultRetryPolicy)
// and the environment (ZARIS_REQUEST_TIMEOUT, ZARIS_PIPELINE, …: see NewConfig); NewConfig
// validates them and returns a *ConfigError that names what is wrong. Protocol
// (ProtocolBinary, …) and Transport (TransportFramed, …) choose the wire,
// Config.Pipelining the shared connections, RetryPolicy the retry rules' numbers and
// RetryBudget the retry budget. A call takes CallOption values (WithMaxAttempts,
// WithTimeout). A call that gets no answer returns a *CallError: the Bound that ended it
// (BoundAttempts, BoundDeadline, …) and every Attempt; its causes match the sentinels
// (ErrNodeUnavailable, ErrInDoubt, …) with errors.Is, and *NodeError, *PartitionError and
// *StatusError with errors.As. The Engine (Client.Engine) reports the map it routes with,
// its Refresher's counts and a key's route. A test injects a clock.Clock with WithClock; a
// program's own connections come from a Dialer of Conn values (DefaultDialer is the
// built-in one). Version is this module's version.
//
// # For middleware
//
// A Middleware wraps a Handler, and Chain composes them; a handler returns a Response. Each
// call is a *Call with its Attempts (Call.Last, Call.Previous) and CallStats. A Classifier
// judges an attempt's Outcome, and the classify layer sets the attempt's Class (Answer,
// Retry, RefreshRetry, Fatal) from its Status or error. Refresher is the shared map
// refresh: a request carries a clustermap.Evidence and gets a clustermap.RefreshResult.
//
// # For generated code
//
// zarisgen's output hands the engine a Service and one Op per operation (its OpKind: Read
// or Write; its Codec and CompactCodec and the StatusTable built with NewStatusTable from
// StatusInfo and StatusRoles, which NewStatusError names statuses by), builds each call
// with NewCall (or takes it from a CallPool, NewCallPool, which reuses it once the stack
// has returned), sets each request's Token from Tokens (NewTokens), runs multi-key
// operations with package batch, whose Call carries a Batch (its BatchItems, and what the
// batch layer found: BatchStats; ErrInvalidBatch for a batch it refuses), and converts the
// IDL's map into a clustermap.Map. IsAtLeastVersion0_1_0 is its compile-time check of this
// package's version.
//
// # Guarantees
//
// Engine and Refresher are safe for concurrent use; a Call belongs to one goroutine at a
// time, and nothing may keep it after its handler returns (a client made by Dial reuses
// it, see CallPool). Time is read through Config.Clock, so tests inject a fake clock;
// socket deadlines are wall-clock time. README.md in this directory explains the design:
// routing, connections, pipelining, the refresher, errors and multi-key calls.
package runtime
