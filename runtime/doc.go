// Package runtime is the client's engine: configuration, the cluster map and key routing,
// connections to the nodes (pooled or pipelined, over every supported Thrift protocol and
// transport), the shared map refresher, the call model the middleware works on, and the
// typed errors. The middleware package decides what to do with an attempt's outcome; this
// package makes attempts and records the facts. Most programs use neither directly: the
// generated zarisclient.Dial builds an Engine and the default stack from runtime options.
//
// # For users
//
// A program passes Options to zarisclient.Dial: WithSeeds and the other With… functions,
// whose defaults come from the environment (EnvRequestTimeout, EnvPipeline, …) and whose
// values NewConfig validates, returning a *ConfigError that names what is wrong. A call
// takes CallOptions (WithMaxAttempts, WithTimeout). A call that gets no answer returns a
// *CallError (the Bound that ended it and every Attempt); its causes match the sentinels
// (ErrNodeUnavailable, ErrInDoubt, …) with errors.Is, and *NodeError, *PartitionError and
// *StatusError with errors.As. Engine (Client.Engine) reports the map it routes with,
// its Refresher's RefreshStats and a key's Route. Clock and Timer are what a test injects
// with WithClock; Dialer and Conn, a connection of the program's own.
//
// # For middleware
//
// A Middleware wraps a Handler; each call is a *Call with its Attempts (Call.Last,
// Call.Previous) and CallStats; the classify layer sets each Attempt's Class from its
// Status or error. RetryPolicy holds the retry rules' numbers, Refresher the shared map
// refresh (Evidence is what a refresh request carries), RetryBudget the retry budget.
//
// # For generated code
//
// zarisgen's output hands the engine a Service and one Op per operation (OpKind, its
// Codec, the StatusTable built with NewStatusTable from StatusInfo and StatusRoles), builds
// each call with NewCall, sets request tokens from Tokens, runs multi-key operations with
// RunBatch (BatchSpec, BatchItems, BatchItemSizes, BatchResult, BatchError), and converts
// the IDL's map into a ClusterMap (NodeInfo, SegmentInfo). IsAtLeastVersion0_1_0 is its
// compile-time check of this package's version. Segment is the key-to-segment function
// that the client and the store share.
//
// # Guarantees
//
// Engine and Refresher are safe for concurrent use; a Call belongs to one goroutine at a
// time. Time is read through Config.Clock, so tests inject a fake clock; socket deadlines
// are wall-clock time. README.md in this directory explains the design: routing,
// connections, pipelining, the refresher, errors and multi-key calls.
package runtime
