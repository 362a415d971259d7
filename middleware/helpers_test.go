package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	"github.com/clustron/zaris-go/middleware"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// stack is the default stack around a scripted transport, a fake refresher and a fake clock.
type stack struct {
	clock     *mwt.Clock
	transport *mwt.Transport
	refresher *mwt.Refresher
	handler   middleware.Handler
}

// newStack builds middleware.Default with policy p around a transport that plays script.
func newStack(t testing.TB, p runtime.RetryPolicy, script []mwt.Outcome, edits ...func(*runtime.Config)) *stack {
	t.Helper()
	s := &stack{
		clock:     mwt.NewClock(),
		transport: mwt.Script(script...),
		refresher: mwt.NewRefresher(1),
	}
	s.transport.Clock = s.clock
	s.transport.MapEpoch = 1
	cfg := runtime.Config{Retry: p, Clock: s.clock}
	for _, edit := range edits {
		edit(&cfg)
	}
	s.handler = middleware.Default(s.transport.Invoke, s.refresher, cfg)
	return s
}

func (s *stack) do(call *runtime.Call) (runtime.Response, error) {
	return s.handler(context.Background(), call)
}

// policy returns the default retry policy changed by edit.
func policy(edit func(*runtime.RetryPolicy)) runtime.RetryPolicy {
	p := runtime.DefaultRetryPolicy
	if edit != nil {
		edit(&p)
	}
	return p
}

// repeat returns n copies of o.
func repeat(o mwt.Outcome, n int) []mwt.Outcome {
	out := make([]mwt.Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

// withBudget sets the stack's retry budget.
func withBudget(b runtime.RetryBudget) func(*runtime.Config) {
	return func(c *runtime.Config) { c.RetryBudget = b }
}

// withAttemptMW adds attempt-level middleware to the stack.
func withAttemptMW(mw ...middleware.Middleware) func(*runtime.Config) {
	return func(c *runtime.Config) { c.AttemptMiddleware = append(c.AttemptMiddleware, mw...) }
}

// The scripted transport records each attempt's operation, which the tests of R1 to R9
// read back.
func TestTransport_SeesTheOperation(t *testing.T) {
	s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Answer(zaris.KvStatus_Ok)})
	_, err := s.do(zt.GetCall("k"))
	require.NoError(t, err)
	require.Len(t, s.transport.Seen(), 1)
	assert.Equal(t, "Get", s.transport.Seen()[0].Op)
}
