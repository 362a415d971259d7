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
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zarismock"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

var allStatuses = []zaris.KvStatus{
	zaris.KvStatus_Ok, zaris.KvStatus_NotFound, zaris.KvStatus_Conflict, zaris.KvStatus_Moved,
	zaris.KvStatus_OwnershipChanging, zaris.KvStatus_ReplicaWriteRejected, zaris.KvStatus_Migrating,
	zaris.KvStatus_Unavailable, zaris.KvStatus_InvalidRequest,
}

// TestR1_RetrySet: only Moved, ReplicaWriteRejected, Unavailable, Migrating and
// OwnershipChanging are retried; every other status is returned at once.
func TestR1_RetrySet(t *testing.T) {
	retried := map[zaris.KvStatus]bool{
		zaris.KvStatus_Moved: true, zaris.KvStatus_ReplicaWriteRejected: true, zaris.KvStatus_Unavailable: true,
		zaris.KvStatus_Migrating: true, zaris.KvStatus_OwnershipChanging: true,
	}
	for _, status := range allStatuses {
		t.Run(status.String(), func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(status), mwt.Answer(zaris.KvStatus_Ok)})
			call := zt.PutCall("k", "v")
			resp, err := s.do(call)
			require.NoError(t, err)
			require.NotNil(t, resp)
			if retried[status] {
				assert.Equal(t, 2, s.transport.Attempts(), "retried")
				assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
				assert.Equal(t, []runtime.Class{zarisclient.Statuses.Class(int64(status)), runtime.Answer}, classes(call))
			} else {
				assert.Equal(t, 1, s.transport.Attempts(), "returned at once")
				assert.Equal(t, status, kvStatus(resp))
				assert.Empty(t, s.clock.Sleeps())
			}
		})
	}
}

// TestR2_RefreshSet: Moved, ReplicaWriteRejected and OwnershipChanging refresh the map before
// the retry, with the answer's epoch as evidence; Unavailable and Migrating do not, nor do
// answers.
func TestR2_RefreshSet(t *testing.T) {
	refreshed := map[zaris.KvStatus]bool{
		zaris.KvStatus_Moved: true, zaris.KvStatus_ReplicaWriteRejected: true, zaris.KvStatus_OwnershipChanging: true,
	}
	for _, status := range allStatuses {
		t.Run(status.String(), func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.AnswerAt(status, 7), mwt.Answer(zaris.KvStatus_Ok)})
			call := zt.PutCall("k", "v")
			_, err := s.do(call)
			require.NoError(t, err)
			if refreshed[status] {
				assert.Equal(t, []int64{7}, s.refresher.Requests(), "one refresh, evidence = the answer's epoch")
				assert.Equal(t, runtime.CallStats{RefreshesRequested: 1, RefreshesPerformed: 1, Backoff: runtime.DefaultRetryPolicy.Backoff}, call.Stats)
				assert.Equal(t, []int64{7}, s.refresher.Observed(), "the newer epoch is observed at once")
			} else {
				assert.Empty(t, s.refresher.Requests())
				assert.Zero(t, call.Stats.RefreshesRequested)
			}
		})
	}
}

// TestR3_TransportFailures: each kind of transport failure is retried after a map refresh;
// the caller's cancelled context, an application exception or any other error is returned at
// once, unchanged inside the call error.
func TestR3_TransportFailures(t *testing.T) {
	retried := []struct {
		name      string
		err       error
		sent      bool
		ownerWait bool // the node could not be reached: B7 waits for a new owner instead
	}{
		{"node unavailable", fmt.Errorf("dial node2:9090: %w", runtime.ErrNodeUnavailable), false, true},
		{"partition unavailable", fmt.Errorf("segment 3: %w", runtime.ErrPartitionUnavailable), false, false},
		{"transport", fmt.Errorf("node 2: %w: connection reset", runtime.ErrTransport), true, false},
		{"attempt timeout", fmt.Errorf("node 2: %w", runtime.ErrAttemptTimeout), true, true},
		{"thrift transport EOF", thrift.NewTTransportException(thrift.END_OF_FILE, "EOF"), true, false},
		{"thrift transport timeout", thrift.NewTTransportExceptionFromError(fmt.Errorf("i/o timeout")), true, false},
		{"thrift protocol", thrift.NewTProtocolExceptionWithType(thrift.INVALID_DATA, errors.New("bad")), true, false},
		{"wrapped thrift transport", fmt.Errorf("read: %w", thrift.NewTTransportException(thrift.NOT_OPEN, "closed")), true, false},
		{"prepended thrift protocol", thrift.PrependError("Put: ", thrift.NewTProtocolException(errors.New("bad"))), true, false},
	}
	for _, tt := range retried {
		t.Run("retried/"+tt.name, func(t *testing.T) {
			first := mwt.Fail(tt.err, tt.sent)
			if tt.ownerWait || tt.sent {
				first = mwt.FailAt(tt.err, tt.sent, 2)
			}
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{first, mwt.Answer(zaris.KvStatus_Ok)})
			call := zt.GetCall("k")
			resp, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
			assert.Equal(t, 2, s.transport.Attempts())
			if tt.ownerWait {
				require.Len(t, s.refresher.OwnerWaits(), 1, "waited for a map that moves node 2's segment (B7)")
				assert.Equal(t, int32(2), s.refresher.OwnerWaits()[0].Gone)
				assert.Empty(t, s.refresher.Requests(), "the wait is the refresh")
				assert.Empty(t, s.clock.Sleeps(), "the wait stands in for the backoff")
			} else {
				assert.Equal(t, []int64{0}, s.refresher.Requests(), "refreshed before the retry, without epoch evidence")
				assert.Empty(t, s.refresher.OwnerWaits())
			}
			assert.Equal(t, runtime.RefreshRetry, call.Attempts[0].Class)
			assert.ErrorIs(t, call.Attempts[0].Err, tt.err, "the attempt keeps its error")
		})
	}

	bug := errors.New("a bug")
	appErr := thrift.NewTApplicationException(thrift.INTERNAL_ERROR, "handler failed")
	reset := fmt.Errorf("%w: connection closed", runtime.ErrTransport)
	fatal := []struct {
		name    string
		script  mwt.Outcome
		cancel  bool
		targets []error
	}{
		{"caller cancelled", mwt.Fail(context.Canceled, true), true, []error{context.Canceled}},
		{"caller cancelled, transport error", mwt.Fail(reset, true), true, []error{context.Canceled, runtime.ErrTransport}},
		{"application exception", mwt.Fail(appErr, true), false, []error{appErr}},
		{"wrapped application exception", mwt.Fail(fmt.Errorf("Put: %w", appErr), true), false, []error{appErr}},
		{"other error", mwt.Fail(bug, true), false, []error{bug}},
		{"other error, not sent", mwt.Fail(bug, false), false, []error{bug}},
		{"client closed", mwt.Fail(fmt.Errorf("%w: %w", runtime.ErrClosed, thrift.NewTTransportException(thrift.NOT_OPEN, "closed")), true), false, []error{runtime.ErrClosed}},
	}
	for _, tt := range fatal {
		t.Run("fatal/"+tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			invoke := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				if tt.cancel {
					cancel() // the caller gives up while the attempt is on the wire
				}
				s.transport.Script = []mwt.Outcome{tt.script}
				return s.transport.Invoke(ctx, call)
			}
			h := middleware.Default(invoke, s.refresher, runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: s.clock})
			call := zt.GetCall("k")
			_, err := h(ctx, call)
			require.Error(t, err)
			for _, target := range tt.targets {
				assert.ErrorIs(t, err, target, "never swallowed")
			}
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, runtime.BoundNone, ce.Bound)
			assert.Len(t, call.Attempts, 1, "returned at once")
			assert.Equal(t, runtime.Fatal, call.Attempts[0].Class)
			assert.Empty(t, s.refresher.Requests())
			assert.Empty(t, s.clock.Sleeps())
		})
	}
}

// TestR8_Answers: Ok, NotFound, Conflict and InvalidRequest are answers, returned at once
// with a nil error: no retry, no refresh, no backoff.
func TestR8_Answers(t *testing.T) {
	for _, status := range []zaris.KvStatus{zaris.KvStatus_Ok, zaris.KvStatus_NotFound, zaris.KvStatus_Conflict, zaris.KvStatus_InvalidRequest} {
		t.Run(status.String(), func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.AnswerAt(status, 1), mwt.Answer(zaris.KvStatus_Ok)})
			call := zt.GetCall("k")
			resp, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, status, kvStatus(resp))
			assert.Equal(t, 1, s.transport.Attempts())
			assert.Empty(t, s.refresher.Requests())
			assert.Empty(t, s.refresher.Observed(), "the answer's epoch is not newer than the map's")
			assert.Empty(t, s.clock.Sleeps())
			assert.Equal(t, runtime.CallStats{}, call.Stats)
		})
	}
}

// TestB2_InDoubt: a request that may have reached the node without a reply is replayed
// only for an idempotent or guarded operation; a non-idempotent, unguarded one returns an
// error matching runtime.ErrInDoubt. A request that provably never left is always retried.
func TestB2_InDoubt(t *testing.T) {
	reset := fmt.Errorf("node 1: %w: connection reset by peer", runtime.ErrTransport)
	timeout := fmt.Errorf("node 1: %w", runtime.ErrAttemptTimeout)
	eof := thrift.NewTTransportException(thrift.END_OF_FILE, "EOF")
	refused := fmt.Errorf("dial node1:9090: %w", runtime.ErrNodeUnavailable)
	tests := []struct {
		name    string
		call    func() *runtime.Call
		outcome mwt.Outcome
		inDoubt bool
	}{
		{"increment sent, reset", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Fail(reset, true), true},
		{"increment sent, attempt timeout", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Fail(timeout, true), true},
		{"increment sent, thrift EOF", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Fail(eof, true), true},
		{"increment not sent, dial refused", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Fail(refused, false), false},
		{"increment not sent, no owner", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Fail(runtime.ErrPartitionUnavailable, false), false},
		{"increment answered Moved", func() *runtime.Call { return zt.IncrementCall("n", 1) }, mwt.Answer(zaris.KvStatus_Moved), false},
		{"guarded put sent, reset", func() *runtime.Call { return zt.GuardedPutCall("k", "v", 3) }, mwt.Fail(reset, true), false},
		{"idempotent get sent, reset", func() *runtime.Call { return zt.GetCall("k") }, mwt.Fail(reset, true), false},
		{"idempotent put sent, timeout", func() *runtime.Call { return zt.PutCall("k", "v") }, mwt.Fail(timeout, true), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{tt.outcome, mwt.Answer(zaris.KvStatus_Ok)})
			call := tt.call()
			resp, err := s.do(call)
			if !tt.inDoubt {
				require.NoError(t, err)
				assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
				assert.Equal(t, 2, s.transport.Attempts(), "retried")
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrInDoubt)
			assert.ErrorIs(t, err, tt.outcome.Err, "the cause is kept")
			assert.Equal(t, 1, s.transport.Attempts(), "not replayed")
			assert.Empty(t, s.refresher.Requests())
			assert.Equal(t, runtime.Fatal, call.Attempts[0].Class)
			assert.ErrorIs(t, call.Attempts[0].Err, runtime.ErrInDoubt)
		})
	}

	t.Run("increment reaches the generated interface once", func(t *testing.T) {
		ctrl := gomock.NewController(t)
		kv := zarismock.NewMockZarisKv(ctrl)
		req := &zaris.IncrementRequest{Key: []byte("n"), Delta: 5}
		kv.EXPECT().Increment(gomock.Any(), gomock.Eq(req)).Return(nil, thrift.NewTTransportException(thrift.END_OF_FILE, "EOF")).Times(1)
		h := middleware.Default(mwt.ClientTransport(kv), mwt.NewRefresher(1), runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock()})
		_, err := h(context.Background(), runtime.NewCall(zt.OpIncrement, req.Key, req, false))
		assert.ErrorIs(t, err, runtime.ErrInDoubt)
	})

	t.Run("increment sent, caller cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		invoke := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			call.Current().Sent = true
			cancel()
			return nil, ctx.Err()
		}
		h := middleware.Default(invoke, mwt.NewRefresher(1), runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock()})
		_, err := h(ctx, zt.IncrementCall("n", 1))
		assert.ErrorIs(t, err, runtime.ErrInDoubt)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// TestB8_TokenedReplayUnderAWindow: a sent, unanswered attempt of a call that carries a
// request token, routed under a map that advertises a dedup window, is replayed; without
// the token, or without the window, it is in doubt as rule B2 says.
func TestB8_TokenedReplayUnderAWindow(t *testing.T) {
	reset := fmt.Errorf("node 1: %w: connection reset by peer", runtime.ErrTransport)
	for _, tc := range []struct {
		name     string
		token    runtime.Token
		window   time.Duration
		replayed bool
	}{
		{"token and window", runtime.Token{Client: 1, Sequence: 1}, time.Minute, true},
		{"token, no window", runtime.Token{Client: 1, Sequence: 1}, 0, false},
		{"window, no token", runtime.Token{}, time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attempts := 0
			invoke := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
				attempts++
				a := call.Current()
				a.Sent, a.DedupWindow = true, tc.window
				if attempts == 1 {
					return nil, reset
				}
				return &zaris.IncrementResponse{Status: zaris.KvStatus_Ok}, nil
			}
			h := middleware.Default(invoke, mwt.NewRefresher(1), runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: mwt.NewClock()})
			call := zt.IncrementCall("n", 1)
			call.Token = tc.token
			_, err := h(context.Background(), call)
			if tc.replayed {
				require.NoError(t, err)
				assert.Equal(t, 2, attempts)
				return
			}
			require.ErrorIs(t, err, runtime.ErrInDoubt)
			assert.Equal(t, 1, attempts)
		})
	}
}

// TestClassify_Classifiers checks each default classifier on the outcomes it knows and
// that it leaves the others to the next one.
func TestClassify_Classifiers(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	ok := &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}
	tests := []struct {
		name    string
		c       middleware.Classifier
		o       middleware.Outcome
		want    runtime.Class
		decided bool
	}{
		{"context: cancelled with error", middleware.CallerContext, middleware.Outcome{Ctx: cancelled, Err: context.Canceled}, runtime.Fatal, true},
		{"context: cancelled but answered", middleware.CallerContext, middleware.Outcome{Ctx: cancelled, Response: ok}, runtime.Unclassified, false},
		{"context: live", middleware.CallerContext, middleware.Outcome{Ctx: bg, Err: runtime.ErrTransport}, runtime.Unclassified, false},
		{"closed", middleware.ClientClosed, middleware.Outcome{Ctx: bg, Err: fmt.Errorf("x: %w", runtime.ErrClosed)}, runtime.Fatal, true},
		{"closed: other error", middleware.ClientClosed, middleware.Outcome{Ctx: bg, Err: runtime.ErrTransport}, runtime.Unclassified, false},
		{"too large", middleware.RequestTooLarge, middleware.Outcome{Ctx: bg, Err: fmt.Errorf("x: %w", runtime.ErrRequestTooLarge)}, runtime.Fatal, true},
		{"too large: other error", middleware.RequestTooLarge, middleware.Outcome{Ctx: bg, Err: runtime.ErrTransport}, runtime.Unclassified, false},
		{"status: answer", middleware.StatusClass, middleware.Outcome{Ctx: bg, Call: zt.GetCall("k"), Response: ok}, runtime.Answer, true},
		{"status: no descriptor", middleware.StatusClass, middleware.Outcome{Ctx: bg, Response: ok}, runtime.Fatal, true},
		{"status: unknown status", middleware.StatusClass, middleware.Outcome{Ctx: bg, Call: zt.GetCall("k"), Response: &mwt.Response{Status: 42}}, runtime.Fatal, true},
		{"status: error", middleware.StatusClass, middleware.Outcome{Ctx: bg, Err: runtime.ErrTransport}, runtime.Unclassified, false},
		{"app exception", middleware.ApplicationException, middleware.Outcome{Ctx: bg, Err: thrift.NewTApplicationException(thrift.UNKNOWN_METHOD, "x")}, runtime.Fatal, true},
		{"app exception: transport error", middleware.ApplicationException, middleware.Outcome{Ctx: bg, Err: thrift.NewTTransportException(thrift.END_OF_FILE, "x")}, runtime.Unclassified, false},
		{"sentinel: plain error", middleware.TransportFailure, middleware.Outcome{Ctx: bg, Err: errors.New("x")}, runtime.Unclassified, false},
		{"thrift: plain error", middleware.ThriftTransport, middleware.Outcome{Ctx: bg, Err: errors.New("EOF transport exception")}, runtime.Unclassified, false},
		{"thrift: unknown TException", middleware.ThriftTransport, middleware.Outcome{Ctx: bg, Err: thrift.WrapTException(errors.New("x"))}, runtime.Unclassified, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, decided := tt.c(tt.o)
			assert.Equal(t, tt.decided, decided)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestClassify_Chain: the first definite answer wins, an undecided outcome is Fatal, and
// Classify fills the attempt from the response when the transport did not.
func TestClassify_Chain(t *testing.T) {
	never := func(middleware.Outcome) (runtime.Class, bool) { return runtime.Unclassified, false }
	retryAll := func(middleware.Outcome) (runtime.Class, bool) { return runtime.Retry, true }
	answer := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Moved), MapEpoch: 9}, nil
	}
	tests := []struct {
		name        string
		classifiers []middleware.Classifier
		want        runtime.Class
	}{
		{"default chain", nil, runtime.RefreshRetry},
		{"first definite wins", []middleware.Classifier{never, retryAll, middleware.StatusClass}, runtime.Retry},
		{"none decides: fatal", []middleware.Classifier{never}, runtime.Fatal},
		{"nil entries skipped", []middleware.Classifier{nil, retryAll}, runtime.Retry},
		{"only nil entries: default chain", []middleware.Classifier{nil}, runtime.RefreshRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := zt.GetCall("k")
			_, err := middleware.Classify(tt.classifiers...)(answer)(context.Background(), call)
			require.NoError(t, err)
			a := call.Attempts[0]
			assert.Equal(t, tt.want, a.Class)
			assert.True(t, a.Answered)
			assert.Equal(t, runtime.Status(zaris.KvStatus_Moved), a.Status)
			assert.Equal(t, int64(9), a.AnswerEpoch)
		})
	}

	t.Run("neither response nor error", func(t *testing.T) {
		call := zt.GetCall("k")
		nothing := func(ctx context.Context, call *runtime.Call) (runtime.Response, error) { return nil, nil }
		_, err := middleware.Classify()(nothing)(context.Background(), call)
		require.Error(t, err)
		assert.Equal(t, runtime.Fatal, call.Attempts[0].Class)
	})
}

func classes(call *runtime.Call) []runtime.Class {
	out := make([]runtime.Class, len(call.Attempts))
	for i, a := range call.Attempts {
		out[i] = a.Class
	}
	return out
}

// The classes come from the status table the operation carries, which zarisgen generates
// from the IDL: a status the table declares retried (here Throttled = 9, slow x3, as a new
// value named in zaris.retry and zaris.slow_backoff would be) is retried after backoff times
// its factor, with no change to the middleware; the same value missing from the table is
// Fatal.
func TestStatusClassesComeFromTheTable(t *testing.T) {
	const throttled = zaris.KvStatus(9)
	infos := append(zarisclient.Statuses.Statuses(), runtime.StatusInfo{Value: int64(throttled), Name: "Throttled", Class: runtime.Retry, SlowFactor: 3})
	roles, _ := zarisclient.Statuses.Roles()
	op := *zt.OpPut
	op.Statuses = runtime.NewStatusTable("KvStatus", &roles, infos)

	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(throttled), mwt.Answer(zaris.KvStatus_Ok)})
	call := zt.PutCall("k", "v")
	call.Op = &op
	resp, err := s.do(call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Equal(t, []runtime.Class{runtime.Retry, runtime.Answer}, classes(call))
	assert.Equal(t, []time.Duration{300 * time.Millisecond}, s.clock.Sleeps(), "backoff x3 after Throttled")

	s = newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(throttled), mwt.Answer(zaris.KvStatus_Ok)})
	call = zt.PutCall("k", "v")
	_, err = s.do(call)
	require.Error(t, err, "the generated table does not hold 9: Fatal")
	assert.Equal(t, 1, s.transport.Attempts())
}

// B2: an idempotent operation (Get) sent without a reply is not in doubt: it is retried.
func TestClassify_B2_IdempotentSentWithoutReplyIsRetried(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
		mwt.Fail(runtime.ErrTransport, true), mwt.Answer(zaris.KvStatus_Ok),
	})
	call := zt.GetCall("k")
	resp, err := s.do(call)
	require.NoError(t, err)
	assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
	assert.Len(t, call.Attempts, 2)
}

// B2 and R3: a non-idempotent write sent that failed with an error that is not retried
// (fatal) is returned as that error, not as in doubt: in doubt is for a replay refused.
func TestClassify_B2_FatalFailureIsNotInDoubt(t *testing.T) {
	bug := errors.New("a bug")
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Fail(bug, true)})
	_, err := s.do(zt.IncrementCall("k", 1))
	require.ErrorIs(t, err, bug)
	assert.NotErrorIs(t, err, runtime.ErrInDoubt)
}
