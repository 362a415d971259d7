// Package runtime is the client's engine: configuration, the cluster map and key routing,
// connections to the nodes (pooled or pipelined, over every supported Thrift protocol and
// transport), the shared map refresher, the call model the middleware works on, and the
// typed errors. The middleware package decides what to do with an attempt's outcome; this
// package makes attempts and records the facts. Most programs use neither directly: the
// generated zarisclient.Dial builds an Engine and the default stack from runtime options.
//
// Where to start:
//
//   - Dial builds an Engine from Options (options.go), over the defaults and the
//     environment (config.go, env.go); NewConfig alone validates a configuration.
//   - Engine.Invoke (invoke.go) makes one attempt of a Call (call.go) and records it on an
//     Attempt (attempt.go); its errors are in errors.go and nodeerror.go.
//   - ClusterMap (clustermap.go) is a node's map; RoutingTable and Router (routing.go) route a
//     key to its segment's owner (Segment, segment.go).
//   - Refresher (refresher.go) fetches a newer map on request, one fetch for all callers.
//   - Connections: pool.go and conn.go (pooled), pipeline.go, pipecall.go and pipeconn.go
//     (pipelined); ownerwatch.go and suspect.go end attempts on a stalled owner (rule B6).
//   - RunBatch (batch.go) runs a multi-key operation; Service and Op (service.go, op.go) are
//     what generated code hands the engine; StatusTable (status.go) is the IDL's classes.
//
// Engine, Router, RoutingTable and Refresher are safe for concurrent use; a Call belongs to
// one goroutine at a time. Time is read through Config.Clock, so tests inject a fake
// clock; socket deadlines are wall-clock time. README.md in this directory explains the
// design: routing, connections, pipelining, the refresher, errors and multi-key calls.
package runtime
