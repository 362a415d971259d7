package zarisslog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/middleware/zarisslog"
	"github.com/clustron/zaris-go/runtime"
)

// stack is the default stack over a scripted transport on a fake clock, with the slog
// middleware logging JSON to a buffer at Debug and above.
func stack(t *testing.T, script []mwt.Outcome, opts ...zarisslog.Option) (middleware.Handler, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	clock := mwt.NewClock()
	transport := mwt.Script(script...)
	transport.Clock = clock
	opts = append([]zarisslog.Option{zarisslog.WithClock(clock)}, opts...)
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: clock,
		CallMiddleware: []runtime.Middleware{zarisslog.Middleware(logger, opts...)}}
	h := middleware.Default(transport.Invoke, mwt.NewRefresher(6), cfg)
	return h, &buf
}

// lines decodes the buffer's JSON lines.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

func TestSilentOnTheHappyPath(t *testing.T) {
	for _, status := range []zaris.KvStatus{zaris.KvStatus_Ok, zaris.KvStatus_NotFound, zaris.KvStatus_Conflict} {
		t.Run(status.String(), func(t *testing.T) {
			h, buf := stack(t, []mwt.Outcome{mwt.Answer(status)})
			resp, err := h(context.Background(), zt.PutCall("k", "v"))
			require.NoError(t, err)
			assert.Equal(t, status, kvStatus(resp))
			assert.Empty(t, buf.String())
		})
	}
}

func TestRetriedCallIsOneLineWithItsHistory(t *testing.T) {
	moved := mwt.AnswerAt(zaris.KvStatus_Moved, 7)
	moved.Node, moved.Took = 2, time.Millisecond
	ok := mwt.AnswerAt(zaris.KvStatus_Ok, 7)
	ok.Took = 2 * time.Millisecond
	h, buf := stack(t, []mwt.Outcome{moved, ok})

	resp, err := h(context.Background(), zt.PutCall("user:42", "ada"))
	require.NoError(t, err)
	require.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))

	got := lines(t, buf)
	require.Len(t, got, 1)
	want := map[string]any{
		"level":     "INFO",
		"msg":       "zaris call retried",
		"op":        "Put",
		"key":       "user:42",
		"status":    "Ok",
		"elapsed":   float64(103 * time.Millisecond),
		"refreshes": map[string]any{"requested": float64(1), "performed": float64(1)},
		"backoff":   float64(100 * time.Millisecond),
		"attempts": map[string]any{
			"1": map[string]any{"node": float64(2), "addr": "node2:9090", "map_epoch": float64(0), "status": "Moved",
				"answer_epoch": float64(7), "class": "refresh-retry", "duration": float64(time.Millisecond)},
			"2": map[string]any{"node": float64(1), "addr": "node1:9090", "map_epoch": float64(0), "status": "Ok",
				"answer_epoch": float64(7), "class": "answer", "duration": float64(2 * time.Millisecond)},
		},
	}
	assert.Equal(t, want, got[0])
}

func TestFailedCallNamesTheBoundAndEveryAttempt(t *testing.T) {
	h, buf := stack(t, []mwt.Outcome{
		mwt.Fail(runtime.ErrNodeUnavailable, false),
		mwt.Answer(zaris.KvStatus_Unavailable),
		mwt.Fail(runtime.ErrTransport, true),
	})
	_, err := h(context.Background(), zt.GetCall("k"))
	require.Error(t, err)

	got := lines(t, buf)
	require.Len(t, got, 1)
	l := got[0]
	assert.Equal(t, "WARN", l["level"])
	assert.Equal(t, "zaris call failed", l["msg"])
	assert.Equal(t, "Get", l["op"])
	assert.Equal(t, err.Error(), l["error"])
	assert.Equal(t, "maxAttempts", l["bound"])
	assert.NotContains(t, l, "status")
	attempts := l["attempts"].(map[string]any)
	require.Len(t, attempts, 3)
	first := attempts["1"].(map[string]any)
	assert.NotContains(t, first, "node", "no node was chosen")
	assert.Equal(t, "zaris: node unavailable", first["error"])
	assert.Equal(t, false, first["sent"])
	assert.Equal(t, "refresh-retry", first["class"])
	assert.Equal(t, "Unavailable", attempts["2"].(map[string]any)["status"])
	assert.Equal(t, "retry", attempts["2"].(map[string]any)["class"])
	third := attempts["3"].(map[string]any)
	assert.Equal(t, "zaris: transport failure", third["error"])
	assert.Equal(t, true, third["sent"])
}

func TestFatalErrorAtTheFirstAttemptIsLogged(t *testing.T) {
	h, buf := stack(t, []mwt.Outcome{mwt.Fail(context.Canceled, true)})
	_, err := h(context.Background(), zt.GetCall("k"))
	require.ErrorIs(t, err, context.Canceled)
	got := lines(t, buf)
	require.Len(t, got, 1)
	assert.Equal(t, "none", got[0]["bound"])
	assert.Equal(t, "fatal", got[0]["attempts"].(map[string]any)["1"].(map[string]any)["class"])
}

func TestOptions(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		h, buf := stack(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_NotFound)}, zarisslog.WithAlways())
		_, err := h(context.Background(), zt.GetCall("k"))
		require.NoError(t, err)
		got := lines(t, buf)
		require.Len(t, got, 1)
		assert.Equal(t, "DEBUG", got[0]["level"])
		assert.Equal(t, "zaris call", got[0]["msg"])
		assert.Equal(t, "NotFound", got[0]["status"])
	})
	t.Run("levels", func(t *testing.T) {
		levels := zarisslog.Levels{OK: slog.LevelInfo, Retried: slog.LevelWarn, Failed: slog.LevelError}
		h, buf := stack(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Migrating), mwt.Answer(zaris.KvStatus_Ok)},
			zarisslog.WithLevels(levels))
		_, err := h(context.Background(), zt.GetCall("k"))
		require.NoError(t, err)
		got := lines(t, buf)
		require.Len(t, got, 1)
		assert.Equal(t, "WARN", got[0]["level"])
	})
	t.Run("below the handler's level", func(t *testing.T) {
		levels := zarisslog.Levels{Retried: slog.LevelDebug - 4}
		h, buf := stack(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Migrating), mwt.Answer(zaris.KvStatus_Ok)},
			zarisslog.WithLevels(levels))
		_, err := h(context.Background(), zt.GetCall("k"))
		require.NoError(t, err)
		assert.Empty(t, buf.String())
	})
	t.Run("without keys", func(t *testing.T) {
		h, buf := stack(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Moved), mwt.Answer(zaris.KvStatus_Ok)},
			zarisslog.WithoutKeys())
		_, err := h(context.Background(), zt.GetCall("secret"))
		require.NoError(t, err)
		require.Len(t, lines(t, buf), 1)
		assert.NotContains(t, buf.String(), "secret")
	})
}

func TestHistoryWithTheTextHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	logger.Info("history", "attempts", zarisslog.History(zarisclient.Statuses, []runtime.Attempt{
		{N: 1, Node: 3, Addr: "h:1", MapEpoch: 4, Answered: true, Status: runtime.Status(zaris.KvStatus_Moved), AnswerEpoch: 5, Class: runtime.RefreshRetry},
	}))
	assert.Equal(t, "level=INFO msg=history attempts.1.node=3 attempts.1.addr=h:1 attempts.1.map_epoch=4 "+
		"attempts.1.status=Moved attempts.1.answer_epoch=5 attempts.1.class=refresh-retry attempts.1.duration=0s\n", buf.String())
}

// WithClock(nil) measures on the system clock, as no WithClock does.
func TestNilClockIsTheSystemClock(t *testing.T) {
	h, buf := stack(t, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)}, zarisslog.WithAlways(), zarisslog.WithClock(nil))
	_, err := h(context.Background(), zt.GetCall("k"))
	require.NoError(t, err)
	assert.Len(t, lines(t, buf), 1)
}
