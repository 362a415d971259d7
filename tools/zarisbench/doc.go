// Command zarisbench measures the client side by side in one run and prints a table; it
// also writes the results as bench.json (make bench writes bench-out/bench.json).
//
// Absolute numbers on a shared machine are noise, so every headline figure is a ratio of
// two measurements taken in the same run, interleaved where it matters:
//
//  1. overhead: the typed client through the full default middleware stack against the
//     raw generated Thrift client on connections from the same dialer, 1 and 16 callers:
//     throughput ratio, and allocations and bytes per call the stack adds;
//  2. protocols: binary, compact and header over framed and buffered transports: ops/s,
//     and bytes on the wire per call for a 100-byte value (counted by a TCP proxy);
//  3. scale: ops/s and p99 against concurrent callers and against nodes, and the heap one
//     pooled connection holds;
//  4. churn: the demo engine (tools/zaris/demo) under a short schedule of every churn kind:
//     per event the application's errors, the longest window without a successful answer,
//     p99 and throughput against the steady phase, the calls that waited for a new owner
//     (rule B7), the time from a kill, a stall and a lost host to the first success on
//     the node's segments (a lost host's against the store's first map with new owners),
//     and map fetches against epoch changes; then, on a cluster of its own, callers on one
//     node's keys while the client refreshes its map and the node is killed right after,
//     inside the refresh's debounce window: no call may fail;
//  5. storm: the refresh-storm regression: callers against a segment with no owner end
//     within their attempts' backoff, the refresher fetches at most once per debounce
//     window, and callers on healthy segments keep their throughput;
//  6. batch: one caller's MultiGet of 100 keys over 3 nodes against the same keys read by
//     100 sequential Gets and by 100 goroutines each making one Get (keys/s, targets 10x
//     and 2x), then the items a MultiGet loop retries while a segment migrates and while a
//     node dies: only items of the moved segments may be retried.
//  7. pipeline: Get on one node at 1 to 256 callers, in turn: the bare-socket floor (a Go
//     echo server on loopback, one request per round trip and pipelined), the raw
//     generated client on a pool, and the typed client pooled and pipelined: ops/s,
//     p50/p99, allocations per call and CPU seconds per 100,000 calls; head-of-line
//     blocking: the Gets' latency next to writers of large values, in both modes; and the
//     floor budget: the CPU per call that half the pipelined floor leaves, against the
//     floor's own sockets and a Get's Thrift encoding and decoding measured in memory.
//  8. codec: each step of a Get in memory (the client encoding the request, the node
//     decoding it, the node encoding the reply, the client decoding it) through the
//     library's generated code over the in-memory binary protocol and through the
//     generated codec (gen/zariscodec): ns, allocations and bytes per operation
//     (testing.Benchmark), targets 0.4x the library's time for all four and one allocation
//     per decoded reply.
//  9. client: the client alone, its node and the floor's echo server in a child process
//     (this program again), so each process's CPU time is its own side's: the default
//     client's heap allocations and bytes per Get at 1 and 64 callers (targets 3 and 200
//     B); its CPU per call pipelined at 64 and 256 callers against its floor (the echo
//     sockets' client side at the client's own calls per read and write, on as many connections,
//     plus the generated codec's client half in memory; target 1.5x), and client plus node
//     against the whole floor (target 2x); and BenchmarkStackOverhead (package runtime, run
//     with go test): the stack's time per call over the raw client's (target 0.6 µs) and no
//     allocation but the Call.
//  10. dedup: an Increment with its request token (rule B8) against the same request without
//     one, on a 3-node cluster: CPU, allocations and bytes per call (medians of interleaved
//     rounds, whole process), the request's bytes on the wire, and the heap one outcome
//     kept costs a node.
//
// -sections runs some of them (comma-separated names); the table shows only those.
//
// Each section runs against an in-process store (tools/store) on loopback. README.md next
// to this file reports a run's numbers.
package main
