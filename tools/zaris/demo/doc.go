// Package demo is the engine of `zaris demo`: it starts an in-process Zaris cluster, runs an
// application workload through the zaris-go client while it drives ownership churn on a
// schedule (segment migration, scale-out join, a node kill and its failover, failback, a
// graceful leave), and reports what the application saw.
//
// A tenth of the calls are multi-key: MultiGet and MultiPut of four of a worker's keys,
// each item checked like a single read or write; the report counts them per phase with
// their items, items retried and items that got no answer.
//
// Each worker goroutine owns its keys, so it knows what every key must hold: the last value
// the store acknowledged, or a later value whose write ended in an error (that write may or
// may not have applied). Every answer is checked against that knowledge as it arrives, and
// after the workload every key is read back. A lost acknowledged write or a misreported
// answer (NotFound for an acknowledged key, Conflict with no concurrent writer) fails the run.
//
// The report has one phase per event (calls are counted in the phase in which they started),
// with throughput, latency percentiles, errors by the bound that tripped and the last
// attempt's outcome, attempts per call, and map refreshes requested by calls versus map
// fetches the client performed. Run writes it as report.json and as timeline.html, a page
// with an inline SVG chart of ops/s and p99 latency per second and every event marked.
package demo
