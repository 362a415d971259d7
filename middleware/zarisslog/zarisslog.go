package zarisslog

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clock"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Levels are the levels Middleware logs each kind of call at.
type Levels struct {
	// OK is the level of a call answered at its first attempt; it is logged only with
	// WithAlways.
	OK slog.Level
	// Retried is the level of a call answered after more than one attempt.
	Retried slog.Level
	// Failed is the level of a call that got no answer.
	Failed slog.Level
}

// DefaultLevels are the levels Middleware uses unless WithLevels says otherwise: Debug for
// a call answered at once, Info for one that was retried, Warn for one that failed.
var DefaultLevels = Levels{OK: slog.LevelDebug, Retried: slog.LevelInfo, Failed: slog.LevelWarn}

// Option configures Middleware.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	levels Levels
	always bool
	noKeys bool
	clock  clock.Clock
}

// WithLevels sets the level of each kind of line (default DefaultLevels).
func WithLevels(l Levels) Option {
	return optionFunc(func(c *config) { c.levels = l })
}

// WithAlways logs every call, also those answered at their first attempt (at Levels.OK).
func WithAlways() Option {
	return optionFunc(func(c *config) { c.always = true })
}

// WithoutKeys leaves the routing key out of the line, for keys that must not reach logs.
func WithoutKeys() Option {
	return optionFunc(func(c *config) { c.noKeys = true })
}

// WithClock measures a call's elapsed time on clk instead of clock.System; give
// it the clock the stack runs on (runtime.Config.Clock) when that is not the system's.
// Nil means clock.System.
func WithClock(clk clock.Clock) Option {
	clk = cmp.Or(clk, clock.System)
	return optionFunc(func(c *config) { c.clock = clk })
}

// Middleware returns a call-level middleware that writes one line to logger for each call
// that needed more than one attempt or got no answer (see the package documentation for
// the line). A nil logger means slog.Default(), looked up when the middleware is built.
// Install it with runtime.WithCallMiddleware; placed behind the retry layer it would
// see single attempts only.
func Middleware(logger *slog.Logger, opts ...Option) middleware.Middleware {
	c := config{levels: DefaultLevels, clock: clock.System}
	for _, o := range opts {
		o.apply(&c)
	}
	if logger == nil {
		logger = slog.Default()
	}
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			start := c.clock.Now()
			resp, err := next(ctx, call)
			level, msg := c.levels.Failed, "zaris call failed"
			switch {
			case err != nil:
			case len(call.Attempts) > 1:
				level, msg = c.levels.Retried, "zaris call retried"
			case !c.always:
				return resp, err
			default:
				level, msg = c.levels.OK, "zaris call"
			}
			if logger.Enabled(ctx, level) {
				logger.LogAttrs(ctx, level, msg, c.attrs(call, resp, err, c.clock.Now().Sub(start))...)
			}
			return resp, err
		}
	}
}

// attrs builds the line's attributes.
func (c *config) attrs(call *runtime.Call, resp runtime.Response, err error, elapsed time.Duration) []slog.Attr {
	attrs := make([]slog.Attr, 0, 9)
	if call.Op != nil {
		attrs = append(attrs, slog.String("op", call.Op.Name))
	}
	if !c.noKeys {
		attrs = append(attrs, slog.String("key", string(call.Key)))
	}
	if err == nil && resp != nil {
		attrs = append(attrs, slog.String("status", call.Op.Statuses.Name(int64(call.Op.Status(resp)))))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		var ce *runtime.CallError
		if errors.As(err, &ce) {
			attrs = append(attrs, slog.String("bound", ce.Bound.String()))
			elapsed = ce.Elapsed
		}
	}
	attrs = append(attrs,
		slog.Duration("elapsed", elapsed),
		slog.Group("refreshes",
			slog.Int("requested", call.Stats.RefreshesRequested),
			slog.Int("performed", call.Stats.RefreshesPerformed)),
		slog.Duration("backoff", call.Stats.Backoff),
		slog.Attr{Key: "attempts", Value: History(statusesOf(call), call.Attempts)},
	)
	return attrs
}

// History returns attempts as a slog group value with one group per attempt, keyed by the
// attempt's number, in the form the package documentation describes; statuses (the
// operation's Op.Statuses) names the statuses. Use it to log an attempt history yourself,
// for example a *runtime.CallError's:
//
//	logger.Warn("giving up", "attempts", zarisslog.History(ce.Statuses, ce.Attempts))
func History(statuses *runtime.StatusTable, attempts []runtime.Attempt) slog.Value {
	groups := make([]slog.Attr, len(attempts))
	for i, a := range attempts {
		groups[i] = slog.Attr{Key: strconv.Itoa(a.N), Value: attemptValue(statuses, a)}
	}
	return slog.GroupValue(groups...)
}

// statusesOf returns the status table of call's operation, or nil.
func statusesOf(call *runtime.Call) *runtime.StatusTable {
	if call.Op == nil {
		return nil
	}
	return call.Op.Statuses
}

// attemptValue is one attempt as a group.
func attemptValue(statuses *runtime.StatusTable, a runtime.Attempt) slog.Value {
	attrs := make([]slog.Attr, 0, 8)
	if a.Node != clustermap.NoNode {
		attrs = append(attrs, slog.Int("node", int(a.Node)))
	}
	if a.Addr != "" {
		attrs = append(attrs, slog.String("addr", a.Addr))
	}
	attrs = append(attrs, slog.Int64("map_epoch", a.MapEpoch))
	switch {
	case a.Answered:
		attrs = append(attrs, slog.String("status", statuses.Name(int64(a.Status))), slog.Int64("answer_epoch", a.AnswerEpoch))
	case a.Err != nil:
		attrs = append(attrs, slog.String("error", a.Err.Error()), slog.Bool("sent", a.Sent))
	}
	attrs = append(attrs, slog.String("class", a.Class.String()), slog.Duration("duration", a.Duration))
	return slog.GroupValue(attrs...)
}
