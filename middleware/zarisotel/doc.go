// Package zarisotel traces and measures Zaris calls with OpenTelemetry.
//
// It uses the OpenTelemetry API only (go.opentelemetry.io/otel, .../trace, .../metric):
// the application chooses the SDK and the exporters, and registers them globally
// (otel.SetTracerProvider, otel.SetMeterProvider) or passes them with WithTracerProvider
// and WithMeterProvider. With no SDK installed everything is a no-op.
//
// # Model
//
// New creates a Telemetry: a tracer and the metric instruments, once per client. Its
// Middleware is a call-level middleware (install it with runtime.WithCallMiddleware):
// it runs once per call, in front of the retry layer, so it sees the call's final outcome
// and its whole attempt history (runtime.Call.Attempts and .Stats).
//
//	tel, err := zarisotel.New()
//	if err != nil { ... }
//	defer tel.Close()
//	kv, err := zarisclient.Dial(ctx, runtime.WithSeeds(seeds...),
//		runtime.WithCallMiddleware(tel.Middleware()))
//	if err != nil { ... }
//	defer kv.Close()
//	err = tel.ObserveRefresher(kv.Engine().Refresher())
//
// # Spans
//
// One client span per call, named "<service>/<op>" from the operation's descriptor (for
// example "ZarisKv/Put"), with rpc.system "apache_thrift", rpc.service, rpc.method, and
// zaris.op.kind (read or write); it is the context's current span for the layers below. When the call ends the
// span gets one event named "zaris.attempt" per attempt, in order, with
//
//	zaris.attempt        the attempt's number, from 1
//	zaris.node           the node it was routed to (absent when none was chosen)
//	server.address       that node's host:port
//	zaris.map_epoch      the epoch of the client's map it was routed with
//	zaris.status         the node's answer, and zaris.answer_epoch, the node's map epoch
//	error.type           when no answer came back: the error's kind (ErrorKind), with
//	                     exception.message and zaris.sent
//	zaris.class          answer, retry, refresh-retry or fatal
//	zaris.duration_ms    the attempt's time on the wire
//
// The events are added when the call ends, so they carry its end time; zaris.duration_ms
// is each attempt's own time. The span ends with zaris.attempts, zaris.refreshes.requested,
// zaris.refreshes.performed, zaris.backoff_ms, and either zaris.status (an answer: Ok,
// NotFound, Conflict and InvalidRequest are answers, not errors) or, for a call that got no
// answer, error.type, zaris.bound, the error recorded as an exception event and the span
// status Error. The routing key is recorded (zaris.key) only WithKeys.
//
// # Metrics
//
// Every metric has the attribute zaris.op. Outcomes are a status name or "error"; error
// kinds come from ErrorKind, a small fixed set.
//
//	zaris.client.calls                      counter   calls, by zaris.outcome (and error.type,
//	                                                  zaris.bound for failed calls)
//	zaris.client.attempts                   counter   attempts, by zaris.outcome (and error.type)
//	zaris.client.retries                    counter   attempts that were followed by another, by
//	                                                  zaris.status: the status or error kind retried
//	zaris.client.map.refreshes.requested    counter   map refreshes calls asked for
//	zaris.client.map.refreshes.performed    counter   of those, the ones that fetched a map
//	zaris.client.call.duration              histogram seconds per call, all attempts and backoff
//	                                                  included, by zaris.outcome (DurationBuckets)
//	zaris.client.batch.items                histogram items per multi-key call (ItemBuckets)
//	zaris.client.batch.items.retried        counter   item retries of multi-key calls
//
// A multi-key call (MultiGet, MultiPut, ...) is one call whose attempts are its
// sub-requests, one per owner per round; they count as attempts, not retries. Its span
// also carries zaris.batch.items, zaris.batch.items_retried, zaris.batch.rounds and
// zaris.batch.sub_requests.
//
// With ObserveRefresher, three observable counters also report the client's shared map
// refresher (runtime.Refresher.Stats), which sees refreshes no call asked for (a newer
// epoch seen in an answer) and how many requests rode another's fetch (rule R6), without
// zaris.op:
//
//	zaris.client.map.refresher.requests     refresh requests received
//	zaris.client.map.refresher.fetches      fetches run, by zaris.result (ok, failed)
//	zaris.client.map.refresher.absorbed     requests that ran no fetch of their own, by
//	                                        zaris.reason (coalesced, debounced)
//	zaris.client.map.refresher.background   fetches no caller's request started
//
// Requested against performed is the number to watch under churn: many calls asking,
// few fetches, means the shared refresh is doing its job.
//
// # Concurrency
//
// A Telemetry and its Middleware are safe for concurrent use.
package zarisotel
