package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// The default stack around a transport: here a scripted one whose first attempt meets a
// node that no longer owns the key. The call is retried after a backoff and a map refresh,
// and the application sees only the answer.
func ExampleDefault() {
	transport := mwt.Script(mwt.AnswerAt(zaris.KvStatus_Moved, 7), mwt.AnswerAt(zaris.KvStatus_Ok, 7))
	refresher := mwt.NewRefresher(6)
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock()}

	// Built once per client; every call runs the same chain.
	handler := middleware.Default(transport.Invoke, refresher, cfg)

	put := mwt.Scripted(zarisclient.OpPut) // the generated Put, answered by the script
	req := &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("Ada")}
	call := runtime.NewCall(put, req.Key, req, false)
	resp, err := handler(context.Background(), call)
	if err != nil {
		log.Fatal(err) // no answer: resp may be nil
	}
	fmt.Println(call.Op.StatusName(resp))
	for _, a := range call.Attempts {
		fmt.Println(a.Describe(call.Op.Statuses), "->", a.Class)
	}
	fmt.Printf("refreshes %d, backoff %s\n", call.Stats.RefreshesRequested, call.Stats.Backoff)
	// Output:
	// Ok
	// attempt 1 node 1 epoch 0: Moved (node epoch 7) -> refresh-retry
	// attempt 2 node 1 epoch 0: Ok (node epoch 7) -> answer
	// refreshes 1, backoff 100ms
}

// A call-level middleware runs once per call, in front of the retry layer: it sees the
// final outcome and the whole attempt history, which makes it the place for logging,
// tracing and metrics. ForOps limits it to the operations named.
func ExampleDefault_callMiddleware() {
	logCalls := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			var ce *runtime.CallError
			switch {
			case errors.As(err, &ce):
				fmt.Printf("%s failed: bound %s after %d attempts, last cause: %v\n", call.Op, ce.Bound, len(ce.Attempts), ce.Unwrap())
			case err == nil:
				fmt.Printf("%s: %s after %d attempts\n", call.Op, call.Op.StatusName(resp), len(call.Attempts))
			}
			return resp, err
		}
	}
	put, get := mwt.Scripted(zarisclient.OpPut), mwt.Scripted(zarisclient.OpGet)
	transport := mwt.Script(mwt.Answer(zaris.KvStatus_Unavailable), mwt.Answer(zaris.KvStatus_Ok), mwt.Answer(zaris.KvStatus_Moved))
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock(),
		CallMiddleware: []runtime.Middleware{middleware.ForOps(logCalls, put)}}
	handler := middleware.Default(transport.Invoke, mwt.NewRefresher(1), cfg)

	ctx := context.Background()
	key := []byte("k")
	putReq, getReq := &zaris.PutRequest{Key: key, Value: []byte("v")}, &zaris.GetRequest{Key: key}
	_, _ = handler(ctx, runtime.NewCall(put, key, putReq, false))                             // logged
	_, _ = handler(ctx, runtime.NewCall(get, key, getReq, false))                             // not a Put: not logged
	_, _ = handler(ctx, runtime.NewCall(put, key, putReq, false, runtime.WithMaxAttempts(2))) // logged
	// Output:
	// Put: Ok after 2 attempts
	// Put failed: bound maxAttempts after 2 attempts, last cause: zaris: status Moved
}

// An attempt-level middleware runs once per attempt, between Classify and the transport:
// it sees every attempt's raw outcome, with the node it went to.
func ExampleDefault_attemptMiddleware() {
	logAttempts := func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			a := call.Current()
			if err != nil {
				fmt.Printf("attempt %d: %v (sent: %v)\n", a.N, err, a.Sent)
			} else {
				fmt.Printf("attempt %d: node %d answered %s\n", a.N, a.Node, call.Op.StatusName(resp))
			}
			return resp, err
		}
	}
	transport := mwt.Script(
		mwt.Fail(runtime.ErrNodeUnavailable, false),
		mwt.Answer(zaris.KvStatus_Migrating),
		mwt.Answer(zaris.KvStatus_Ok),
	)
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock(),
		AttemptMiddleware: []runtime.Middleware{logAttempts}}
	handler := middleware.Default(transport.Invoke, mwt.NewRefresher(1), cfg)

	req := &zaris.PutRequest{Key: []byte("k"), Value: []byte("v")}
	call := runtime.NewCall(mwt.Scripted(zarisclient.OpPut), req.Key, req, false)
	resp, err := handler(context.Background(), call)
	if err != nil {
		log.Fatal(err) // no answer: resp may be nil
	}
	fmt.Println(call.Op.StatusName(resp), "backoff", call.Stats.Backoff)
	// Output:
	// attempt 1: zaris: node unavailable (sent: false)
	// attempt 2: node 1 answered Migrating
	// attempt 3: node 1 answered Ok
	// Ok backoff 1.7s
}
