package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarismock"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// TestR4_TwoBounds: a call makes attempts while attempts <= maxAttempts AND now < deadline,
// whichever trips first.
func TestR4_TwoBounds(t *testing.T) {
	t.Run("regression: maxAttempts 3, 60 s, always Moved", func(t *testing.T) {
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 1)})
		call := zt.PutCall("k", "v")
		_, err := s.do(call)
		require.Error(t, err)
		assert.Equal(t, 3, s.transport.Attempts(), "exactly maxAttempts attempts, not 60 s of them")
		assert.LessOrEqual(t, len(s.refresher.Requests()), 3)
		assert.Equal(t, 2, call.Stats.RefreshesRequested, "one refresh before each retry")
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundAttempts, ce.Bound)
		assert.Equal(t, 3, ce.MaxAttempts)
		assert.Equal(t, 300*time.Millisecond, ce.Elapsed, "100 ms + 200 ms of backoff on the fake clock")
		var se *runtime.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, runtime.Status(zaris.KvStatus_Moved), se.Status)
	})

	t.Run("deadline trips first", func(t *testing.T) {
		s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.MaxAttempts = 10 }), []mwt.Outcome{mwt.Answer(zaris.KvStatus_Unavailable)})
		call := zt.GetCall("k", runtime.WithTimeout(250*time.Millisecond))
		_, err := s.do(call)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundDeadline, ce.Bound)
		assert.Equal(t, 2, s.transport.Attempts(), "attempts at 0 and 100 ms; the next would start at the deadline")
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 150 * time.Millisecond}, s.clock.Sleeps(), "the second wait is clamped")
		assert.Equal(t, 250*time.Millisecond, ce.Elapsed)
		assert.Len(t, ce.Attempts, 2)
		var se *runtime.StatusError
		require.ErrorAs(t, err, &se, "unwraps to the last outcome")
		assert.Equal(t, runtime.Status(zaris.KvStatus_Unavailable), se.Status)
	})

	t.Run("slow attempts use up the deadline", func(t *testing.T) {
		slow := mwt.Answer(zaris.KvStatus_Moved)
		slow.Took = 40 * time.Second
		s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.MaxAttempts = 10 }), []mwt.Outcome{slow})
		_, err := s.do(zt.GetCall("k"))
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundDeadline, ce.Bound)
		assert.Equal(t, 2, s.transport.Attempts(), "attempt 2 starts at 40.1 s, attempt 3 would start after 60 s")
		assert.Equal(t, 80*time.Second+100*time.Millisecond, ce.Elapsed)
	})

	t.Run("caller's context deadline is a deadline bound", func(t *testing.T) {
		s := newStack(t, runtime.DefaultRetryPolicy, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		invoke := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			call.Current().Sent = true
			return nil, fmt.Errorf("read: %w", context.DeadlineExceeded)
		}
		h := middleware.Default(invoke, s.refresher, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: s.clock})
		expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel2()
		_, err := h(expired, zt.GetCall("k"))
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundDeadline, ce.Bound)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})

	t.Run("per-call maxAttempts", func(t *testing.T) {
		for _, n := range []int{1, 2, 5} {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Unavailable)})
			_, err := s.do(zt.GetCall("k", runtime.WithMaxAttempts(n)))
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, runtime.BoundAttempts, ce.Bound)
			assert.Equal(t, n, s.transport.Attempts())
			assert.Equal(t, n, ce.MaxAttempts)
		}
	})

	t.Run("no request timeout: attempts bound alone", func(t *testing.T) {
		s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.RequestTimeout = 0; p.MaxAttempts = 6 }), []mwt.Outcome{mwt.Answer(zaris.KvStatus_Migrating)})
		call := zt.PutCall("k", "v")
		_, err := s.do(call)
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundAttempts, ce.Bound)
		assert.Equal(t, 6, s.transport.Attempts())
		assert.True(t, call.Deadline.IsZero())
	})
}

// TestR7_DisableRetries: with retries disabled every call is a single attempt, whatever the
// outcome and whatever the call asks for.
func TestR7_DisableRetries(t *testing.T) {
	disabled := policy(func(p *runtime.RetryPolicy) { p.Disabled = true })
	outcomes := []mwt.Outcome{
		mwt.Answer(zaris.KvStatus_Moved),
		mwt.Answer(zaris.KvStatus_Migrating),
		mwt.Fail(runtime.ErrNodeUnavailable, false),
	}
	for _, o := range outcomes {
		t.Run(fmt.Sprint(o.Status, o.Err), func(t *testing.T) {
			s := newStack(t, disabled, []mwt.Outcome{o, mwt.Answer(zaris.KvStatus_Ok)})
			call := zt.GetCall("k", runtime.WithMaxAttempts(5))
			_, err := s.do(call)
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, runtime.BoundAttempts, ce.Bound)
			assert.Equal(t, 1, ce.MaxAttempts, "the off switch wins over the call's own cap")
			assert.Equal(t, 1, s.transport.Attempts())
			assert.Empty(t, s.refresher.Requests())
			assert.Empty(t, s.clock.Sleeps())
		})
	}
	t.Run("answer", func(t *testing.T) {
		s := newStack(t, disabled, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
		resp, err := s.do(zt.GetCall("k"))
		require.NoError(t, err)
		assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	})
	t.Run("MaxAttempts", func(t *testing.T) {
		assert.Equal(t, 1, middleware.MaxAttempts(disabled, zt.GetCall("k", runtime.WithMaxAttempts(9))))
		assert.Equal(t, 9, middleware.MaxAttempts(runtime.DefaultRetryPolicy, zt.GetCall("k", runtime.WithMaxAttempts(9))))
		assert.Equal(t, 3, middleware.MaxAttempts(runtime.DefaultRetryPolicy, zt.GetCall("k")))
		assert.Equal(t, 3, middleware.MaxAttempts(runtime.DefaultRetryPolicy, zt.GetCall("k", runtime.WithMaxAttempts(0))), "n < 1 leaves the client's cap")
		assert.Equal(t, 1, middleware.MaxAttempts(runtime.RetryPolicy{}, zt.GetCall("k")))
	})
}

// TestR9_SafeReplays: a guarded Put replayed after a transport failure reaches the
// generated interface unchanged and answers Conflict, which the caller gets as an answer.
func TestR9_SafeReplays(t *testing.T) {
	ctrl := gomock.NewController(t)
	kv := zarismock.NewMockZarisKv(ctrl)
	version := int64(3)
	req := &zaris.PutRequest{Key: []byte("k"), Value: []byte("v"), IfMatchVersion: &version}
	gomock.InOrder(
		// The first write was applied, but the reply was lost.
		kv.EXPECT().Put(gomock.Any(), gomock.Eq(req)).Return(nil, thrift.NewTTransportException(thrift.END_OF_FILE, "EOF")),
		// The replay meets version 4 and answers Conflict.
		kv.EXPECT().Put(gomock.Any(), gomock.Eq(req)).Return(&zaris.PutResponse{Status: zaris.KvStatus_Conflict, Version: 4, MapEpoch: 1}, nil),
	)
	refresher := mwt.NewRefresher(1)
	clock := mwt.NewClock()
	h := middleware.Default(mwt.ClientTransport(kv), refresher, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock})

	call := runtime.NewCall(zt.OpPut, req.Key, req, true)
	resp, err := h(context.Background(), call)
	require.NoError(t, err, "Conflict is an answer")
	put, ok := resp.(*zaris.PutResponse)
	require.True(t, ok, "the generated response type reaches the caller")
	assert.Equal(t, zaris.KvStatus_Conflict, put.Status)
	assert.Equal(t, int64(4), put.Version)
	assert.Len(t, call.Attempts, 2)
	assert.Same(t, req, call.Request, "the request is never modified")
	assert.Equal(t, int64(3), *req.IfMatchVersion)
}

// TestB4_TerminalError: a call out of budget returns an error naming the bound, with each
// attempt's node, status or error and epoch, that unwraps to the last cause.
func TestB4_TerminalError(t *testing.T) {
	refused := fmt.Errorf("dial node2:9090: %w", runtime.ErrNodeUnavailable)
	reset := fmt.Errorf("node 1: %w: connection reset", runtime.ErrTransport)
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
		mwt.Fail(refused, false),
		mwt.AnswerAt(zaris.KvStatus_Moved, 5),
		mwt.Fail(reset, true),
	})
	call := zt.GetCall("k")
	_, err := s.do(call)
	require.Error(t, err)

	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Get", ce.Op)
	assert.Equal(t, runtime.BoundAttempts, ce.Bound)
	assert.Equal(t, 3, ce.MaxAttempts)
	assert.Equal(t, 300*time.Millisecond, ce.Elapsed)
	require.Len(t, ce.Attempts, 3)

	a1, a2, a3 := ce.Attempts[0], ce.Attempts[1], ce.Attempts[2]
	assert.Equal(t, clustermap.NoNode, a1.Node)
	assert.False(t, a1.Sent)
	assert.ErrorIs(t, a1.Err, runtime.ErrNodeUnavailable)
	assert.Equal(t, int32(1), a2.Node)
	assert.True(t, a2.Answered)
	assert.Equal(t, runtime.Status(zaris.KvStatus_Moved), a2.Status)
	assert.Equal(t, int64(5), a2.AnswerEpoch)
	assert.Equal(t, "node1:9090", a3.Addr)
	assert.ErrorIs(t, a3.Err, runtime.ErrTransport)
	for i, a := range ce.Attempts {
		assert.Equal(t, i+1, a.N)
		assert.Equal(t, int64(1), a.MapEpoch)
		assert.Equal(t, runtime.RefreshRetry, a.Class)
	}

	assert.ErrorIs(t, err, runtime.ErrTransport, "unwraps to the last cause")
	assert.NotErrorIs(t, err, runtime.ErrNodeUnavailable, "earlier causes are in the attempts, not the chain")
	msg := err.Error()
	for _, want := range []string{"Get", "3 of 3 attempts", "attempt 1 no node", "attempt 2 node 1 epoch 1: Moved (node epoch 5)", "connection reset"} {
		assert.Contains(t, msg, want)
	}

	ce.Attempts[0].Node = 99
	assert.Equal(t, clustermap.NoNode, call.Attempts[0].Node, "the error holds a copy of the attempts")

	t.Run("a status as last cause", func(t *testing.T) {
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Unavailable)})
		_, err := s.do(zt.GetCall("k"))
		var se *runtime.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, runtime.Status(zaris.KvStatus_Unavailable), se.Status)
	})

	t.Run("a fatal error names no bound", func(t *testing.T) {
		bug := errors.New("bug")
		s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved), mwt.Fail(bug, true)})
		_, err := s.do(zt.GetCall("k"))
		var ce *runtime.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, runtime.BoundNone, ce.Bound)
		assert.Len(t, ce.Attempts, 2)
		assert.ErrorIs(t, err, bug)
	})
}

// TestRetry_WithoutClassify: a retry layer with no classifier never retries: an outcome
// without an error is an answer, one with an error is fatal.
func TestRetry_WithoutClassify(t *testing.T) {
	clock := mwt.NewClock()
	tr := mwt.Script(mwt.Answer(zaris.KvStatus_Moved))
	h := middleware.Retry(runtime.DefaultRetryPolicy, clock)(tr.Invoke)
	resp, err := h(context.Background(), zt.GetCall("k"))
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Moved, kvStatus(resp))

	tr = mwt.Script(mwt.Fail(runtime.ErrTransport, true))
	h = middleware.Retry(runtime.DefaultRetryPolicy, clock)(tr.Invoke)
	_, err = h(context.Background(), zt.GetCall("k"))
	assert.ErrorIs(t, err, runtime.ErrTransport)
	assert.Equal(t, 1, tr.Attempts())
}

// R4: when the deadline passes with attempts left, the call ends with BoundDeadline, not
// BoundAttempts.
func TestRetry_R4_DeadlineBeforeTheLastAttemptIsTheDeadlineBound(t *testing.T) {
	slow := mwt.Outcome{Status: runtime.Status(zaris.KvStatus_Unavailable), Node: 1, Took: 30 * time.Second}
	s := newStack(t, policy(func(p *runtime.RetryPolicy) { p.Backoff = 0 }), repeat(slow, 3))
	call := zt.GetCall("k", runtime.WithTimeout(time.Minute))
	_, err := s.do(call)
	ce, ok := errors.AsType[*runtime.CallError](err)
	require.True(t, ok, "%T: %v", err, err)
	assert.Equal(t, runtime.BoundDeadline, ce.Bound)
	assert.Len(t, call.Attempts, 2, "the deadline passed after two attempts of 30 s")
}

// B4: the CallError carries each attempt with its own error. A layer that fails an attempt
// without recording why gets the loop's error recorded on it; an attempt that recorded its
// error keeps it, whatever the layers above returned.
func TestRetry_B4_FailedAttemptRecordsItsError(t *testing.T) {
	recorded := errors.New("recorded by the attempt")
	for _, tc := range []struct {
		name                       string
		attemptErr, returned, want error
	}{
		{"not recorded", nil, assert.AnError, assert.AnError},
		{"recorded", recorded, assert.AnError, recorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := func(_ context.Context, call *runtime.Call) (runtime.Response, error) {
				call.Last().Err = tc.attemptErr
				return nil, tc.returned
			}
			call := zt.GetCall("k")
			_, err := middleware.Retry(runtime.DefaultRetryPolicy, mwt.NewClock())(next)(context.Background(), call)
			ce, ok := errors.AsType[*runtime.CallError](err)
			require.True(t, ok, "%T: %v", err, err)
			require.Len(t, ce.Attempts, 1, "an unclassified error is fatal")
			assert.Equal(t, tc.want, ce.Attempts[0].Err)
		})
	}
}
