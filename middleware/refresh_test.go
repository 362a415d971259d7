package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/zaristest"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// TestRefreshOnMoved_Stats: each refresh the call asks for is counted, and counted as
// performed only when a fetch ran for it.
func TestRefreshOnMoved_Stats(t *testing.T) {
	tests := []struct {
		name          string
		result        runtime.RefreshResult
		wantPerformed int
	}{
		{"performed", runtime.RefreshResult{Performed: true}, 2},
		{"coalesced into a flight that completed", runtime.RefreshResult{Performed: true, Coalesced: true}, 2},
		{"debounced", runtime.RefreshResult{Debounced: true}, 0},
		{"wait expired", runtime.RefreshResult{TimedOut: true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{
				mwt.AnswerAt(zaris.KvStatus_Moved, 2), mwt.AnswerAt(zaris.KvStatus_OwnershipChanging, 3), mwt.Answer(zaris.KvStatus_Ok),
			})
			s.refresher.OnRefresh = func(context.Context, int64) runtime.RefreshResult { return tt.result }
			call := zt.PutCall("k", "v")
			_, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, []int64{2, 3}, s.refresher.Requests(), "evidence is each answer's epoch")
			assert.Equal(t, 2, call.Stats.RefreshesRequested)
			assert.Equal(t, tt.wantPerformed, call.Stats.RefreshesPerformed)
		})
	}
}

// TestRefreshOnMoved_Observe (B1): an answer whose epoch is newer than the client's map is
// reported with Observe, without waiting for a refresh; answers at the map's epoch or older
// are not. A RefreshRetry outcome with a newer epoch is observed at once (the fetch runs
// during the backoff) and refreshed before the retry.
func TestRefreshOnMoved_Observe(t *testing.T) {
	tests := []struct {
		name         string
		script       []mwt.Outcome
		wantObserved []int64
		wantRequests []int64
	}{
		{"Ok with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 4)}, []int64{4}, nil},
		{"NotFound with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_NotFound, 2)}, []int64{2}, nil},
		{"Ok at the map's epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 1)}, nil, nil},
		{"Ok with an older epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Ok, 0)}, nil, nil},
		{"Unavailable with a newer epoch, then Ok", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Unavailable, 6), mwt.AnswerAt(zaris.KvStatus_Ok, 6)}, []int64{6, 6}, nil},
		{"Moved with a newer epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 8), mwt.AnswerAt(zaris.KvStatus_Ok, 8)}, []int64{8}, []int64{8}},
		{"Moved at the map's epoch", []mwt.Outcome{mwt.AnswerAt(zaris.KvStatus_Moved, 1), mwt.AnswerAt(zaris.KvStatus_Ok, 1)}, nil, []int64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, tt.script)
			call := zt.GetCall("k")
			_, err := s.do(call)
			require.NoError(t, err)
			assert.Equal(t, tt.wantObserved, s.refresher.Observed())
			assert.Equal(t, tt.wantRequests, s.refresher.Requests())
		})
	}
}

// TestRefreshOnMoved_NoRefreshWithoutRetry: the refresh comes before a retry, so a call
// that will not be retried never waits for one.
func TestRefreshOnMoved_NoRefreshWithoutRetry(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved)})
	_, err := s.do(zt.GetCall("k", runtime.WithMaxAttempts(1)))
	require.Error(t, err)
	assert.Empty(t, s.refresher.Requests())
}

// TestRefreshOnMoved_ContextEnds: a caller whose context ends while it waits for the
// refresh gets its context's error and makes no further attempt.
func TestRefreshOnMoved_ContextEnds(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved), mwt.Answer(zaris.KvStatus_Ok)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.refresher.OnRefresh = func(context.Context, int64) runtime.RefreshResult {
		cancel()
		return runtime.RefreshResult{TimedOut: true}
	}
	call := zt.GetCall("k")
	_, err := s.handler(ctx, call)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, s.transport.Attempts())
	assert.Equal(t, 1, call.Stats.RefreshesRequested)
}
