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

// tracer returns a middleware that appends name> on the way in and <name on the way out.
func tracer(trace *[]string, name string) middleware.Middleware {
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			*trace = append(*trace, name+">")
			resp, err := next(ctx, call)
			*trace = append(*trace, "<"+name)
			return resp, err
		}
	}
}

func okHandler(trace *[]string) middleware.Handler {
	return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
		*trace = append(*trace, "handler")
		return &mwt.Response{Status: runtime.Status(zaris.KvStatus_Ok)}, nil
	}
}

func TestChain(t *testing.T) {
	tests := []struct {
		name string
		mw   []string
		want []string
	}{
		{"empty", nil, []string{"handler"}},
		{"one", []string{"a"}, []string{"a>", "handler", "<a"}},
		{"first listed is outermost", []string{"a", "b", "c"}, []string{"a>", "b>", "c>", "handler", "<c", "<b", "<a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trace []string
			var mw []middleware.Middleware
			for _, n := range tt.mw {
				mw = append(mw, tracer(&trace, n), nil) // nil entries are skipped
			}
			h := middleware.Chain(mw...)(okHandler(&trace))
			_, err := h(context.Background(), zt.GetCall("k"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, trace)
		})
	}
}

func TestChain_BuiltOnce(t *testing.T) {
	built := 0
	counting := func(next middleware.Handler) middleware.Handler {
		built++
		return next
	}
	var trace []string
	h := middleware.Chain(counting, counting)(okHandler(&trace))
	for range 3 {
		_, err := h(context.Background(), zt.GetCall("k"))
		require.NoError(t, err)
	}
	assert.Equal(t, 2, built, "each middleware is applied when the chain is built, not per call")
}

func TestForOps(t *testing.T) {
	tests := []struct {
		name string
		call *runtime.Call
		ops  []*runtime.Op
		want []string
	}{
		{"named op", zt.PutCall("k", "v"), []*runtime.Op{zt.OpPut}, []string{"w>", "handler", "<w"}},
		{"one of several", zt.IncrementCall("k", 1), []*runtime.Op{zt.OpPut, zt.OpIncrement}, []string{"w>", "handler", "<w"}},
		{"other op", zt.GetCall("k"), []*runtime.Op{zt.OpPut}, []string{"handler"}},
		{"no ops", zt.GetCall("k"), nil, []string{"handler"}},
		{"same name, other descriptor", zt.PutCall("k", "v"), []*runtime.Op{{Name: "Put"}}, []string{"w>", "handler", "<w"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var trace []string
			h := middleware.ForOps(tracer(&trace, "w"), tt.ops...)(okHandler(&trace))
			_, err := h(context.Background(), tt.call)
			require.NoError(t, err)
			assert.Equal(t, tt.want, trace)
		})
	}
	t.Run("nil middleware", func(t *testing.T) {
		var trace []string
		h := middleware.ForOps(nil, zt.OpPut)(okHandler(&trace))
		_, err := h(context.Background(), zt.PutCall("k", "v"))
		require.NoError(t, err)
		assert.Equal(t, []string{"handler"}, trace)
	})
}
