package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// closingRefresher is a fake refresher that says when its client closes, as
// runtime.Refresher does, and routes multi-key items by their key's last byte.
type closingRefresher struct {
	*mwt.Refresher
	ownerByLastByte
	done chan struct{}
}

func (r closingRefresher) Done() <-chan struct{} { return r.done }

// closeOnBackoff makes the first backoff on clock close the client (done) and then wait
// for its context to end, as a real sleep would. It fails the test if nothing ends the
// backoff: its wall-clock bound only keeps a failing run from hanging.
func closeOnBackoff(t *testing.T, clock *mwt.Clock, done chan struct{}) {
	clock.OnSleep = func(ctx context.Context, d time.Duration) {
		close(done)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("the backoff of %v went on after the client closed", d)
		}
	}
}

// A call waiting out its backoff when the client closes ends at once with ErrClosed,
// without another attempt.
func TestDefault_CloseEndsACallInBackoff(t *testing.T) {
	clock := mwt.NewClock()
	transport := mwt.Script(mwt.Answer(zaris.KvStatus_Unavailable), mwt.Answer(zaris.KvStatus_Ok))
	transport.Clock = clock
	r := closingRefresher{Refresher: mwt.NewRefresher(1), done: make(chan struct{})}
	closeOnBackoff(t, clock, r.done)
	h := middleware.Default(transport.Invoke, r, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})

	call := zt.GetCall("k")
	_, err := h(context.Background(), call)
	require.ErrorIs(t, err, runtime.ErrClosed)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Attempts, 1, "no attempt after the client closed")
	require.Len(t, transport.Seen(), 1)
}

// The same for a multi-key call between its rounds: the items that met churn end with
// ErrClosed, and the batch is not sent again.
func TestDefault_CloseEndsABatchInBackoff(t *testing.T) {
	clock := mwt.NewClock()
	sent := 0
	transport := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
		sent++
		a := call.StartAttempt()
		a.Node, a.Addr, a.Sent, a.Answered, a.Status = call.Target.Node, call.Target.Addr, true, true, runtime.Status(zaris.KvStatus_Ok)
		resp := &zaris.MultiGetResponse{Status: zaris.KvStatus_Ok}
		for range call.Request.(*zaris.MultiGetRequest).Items {
			resp.Results = append(resp.Results, &zaris.GetOutcome{Status: zaris.KvStatus_Unavailable})
		}
		return resp, nil
	}
	r := closingRefresher{Refresher: mwt.NewRefresher(1), done: make(chan struct{})}
	closeOnBackoff(t, clock, r.done)
	h := middleware.Default(transport, r, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})

	resp, err := zarisclient.New(h).MultiGet(context.Background(), &zaris.MultiGetRequest{
		Items: []*zaris.GetItem{{Key: []byte("a0")}}})
	if err == nil {
		err = resp.Err(0)
	}
	require.ErrorIs(t, err, runtime.ErrClosed)
	require.Equal(t, 1, sent, "the batch was sent again after the client closed")
}
