// Package demo is the engine of `zaris demo`: it starts an in-process Zaris cluster, runs an
// application workload through the zaris-go client while it drives ownership churn on a
// schedule (segment migration, scale-out join, a node kill and its failover, failback, a
// graceful leave, a node stalled for StallFor as by SIGSTOP, and a lost host: a node that
// stops answering without refusing anything and stays lost until the store has failed it
// over and LostHostHold more, then is replaced), and reports what the application saw.
//
// A tenth of the calls are multi-key: MultiGet and MultiPut of four of a worker's keys,
// each item checked like a single read or write; the report counts them per phase with
// their items, items retried and items that got no answer. One in twenty increments one of
// the worker's two counters, which must end holding exactly the increments acknowledged:
// an Increment whose reply was lost is replayed, never applied twice (the client's rule B8).
//
// Each worker goroutine owns its keys, so it knows what every key must hold: the last value
// the store acknowledged, or a later value whose write ended in an error (that write may or
// may not have applied). Every answer is checked against that knowledge as it arrives, and
// after the workload every key and counter is read back. A lost acknowledged write, a
// counter off its acknowledged increments, or a misreported
// answer (NotFound for an acknowledged key, Conflict with no concurrent writer) fails the run.
//
// The report has one phase per event, named as the event is from its start (such as
// "kill n3"; calls are counted in the phase in which they started), with throughput,
// latency percentiles, errors by the bound that tripped and the last attempt's outcome,
// attempts per call, retried attempts by what each saw (a status such as "Moved status" or
// "Unavailable status", or the kind of failure when no answer came: transport, attempt
// timeout, node unavailable, "B6: owner moved away"; a multi-key call's sub-requests are not
// retries, its item retries are counted with it), the map refreshes the calls asked for and
// the map fetches the client made, of which those in the background (no call's request
// started them: clustermap.RefreshStats.Background), and the calls that waited for a map naming
// a new owner of a key whose owner they could not reach (the client's rule B7), with the
// longest such wait; and the process's peak resident set size (VmHWM on Linux). Run writes
// it as report.json and as timeline.html, a page that fills the window's width with charts
// per second of ops/s, p99 latency, the calls waiting (in flight over 100 ms) with the calls
// that failed, and retried attempts stacked by cause, every event marked, and tables of the
// phases and of their retried attempts by cause. WriteScreenshot draws that page as
// timeline.png with headless Chromium.
//
// The demo keeps no per-call samples: each phase and each second has counters and an HDR
// latency histogram (3 significant digits per phase, 2 per second), and a second's
// histogram is reduced to its p99 once every worker has moved past that second. So its
// memory grows with the run's length by a few counters per second, not with the number of
// calls. What the answer checks need, each key's last acknowledged value and the writes of
// unknown outcome since, is kept per key.
package demo
