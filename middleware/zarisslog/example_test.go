package zarisslog_test

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/middleware/zarisslog"
	"github.com/clustron/zaris-go/runtime"
)

// The slog middleware sits in front of the retry layer. A call answered at once writes
// nothing; a call that met a node which no longer owned its key writes one line with the
// whole attempt history. (A scripted transport on a fake clock stands in for a cluster,
// and the time attribute is dropped, so that the output is the same on every run; in a
// service, pass engine.Invoke, engine.Refresher() and engine.Config().)
func ExampleMiddleware() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))

	clock := mwt.NewClock()
	transport := mwt.Script(
		mwt.Answer(zaris.KvStatus_Ok),            // the first call: answered at once
		mwt.AnswerAt(zaris.KvStatus_Moved, 7),    // the second: the node has a newer map
		mwt.AnswerAt(zaris.KvStatus_NotFound, 7), // and the new owner answers
	)
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock,
		CallMiddleware: []runtime.Middleware{zarisslog.Middleware(logger, zarisslog.WithClock(clock))}}
	handler := middleware.Default(transport.Invoke, mwt.NewRefresher(6), cfg)

	put, get := mwt.Scripted(zarisclient.OpPut), mwt.Scripted(zarisclient.OpGet) // answered by the script
	putReq := &zaris.PutRequest{Key: []byte("user:42"), Value: []byte("ada")}
	getReq := &zaris.GetRequest{Key: []byte("user:43")}
	ctx := context.Background()
	_, _ = handler(ctx, runtime.NewCall(put, putReq.Key, putReq, false))
	_, _ = handler(ctx, runtime.NewCall(get, getReq.Key, getReq, false))
	// Output:
	// {"level":"INFO","msg":"zaris call retried","op":"Get","key":"user:43","status":"NotFound","elapsed":100000000,"refreshes":{"requested":1,"performed":1},"backoff":100000000,"attempts":{"1":{"node":1,"addr":"node1:9090","map_epoch":0,"status":"Moved","answer_epoch":7,"class":"refresh-retry","duration":0},"2":{"node":1,"addr":"node1:9090","map_epoch":0,"status":"NotFound","answer_epoch":7,"class":"answer","duration":0}}}
}

// History logs the attempt history of a *runtime.CallError where the application handles
// the error, with any slog handler.
func ExampleHistory() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	transport := mwt.Script(mwt.Fail(runtime.ErrNodeUnavailable, false))
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock()}
	handler := middleware.Default(transport.Invoke, mwt.NewRefresher(1), cfg)

	req := &zaris.GetRequest{Key: []byte("user:42")}
	call := runtime.NewCall(mwt.Scripted(zarisclient.OpGet), req.Key, req, false, runtime.WithMaxAttempts(2))
	_, err := handler(context.Background(), call)
	var ce *runtime.CallError
	if errors.As(err, &ce) {
		logger.Warn("lookup failed", "bound", ce.Bound, "attempts", zarisslog.History(ce.Statuses, ce.Attempts))
	}
	// Output:
	// level=WARN msg="lookup failed" bound=maxAttempts attempts.1.map_epoch=0 attempts.1.error="zaris: node unavailable" attempts.1.sent=false attempts.1.class=refresh-retry attempts.1.duration=0s attempts.2.map_epoch=0 attempts.2.error="zaris: node unavailable" attempts.2.sent=false attempts.2.class=refresh-retry attempts.2.duration=0s
}
