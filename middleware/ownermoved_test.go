package middleware_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/gen/zaris"
	zt "github.com/clustron/zaris-go/internal/testsupport/zaristest"
	mwt "github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// TestB6_OwnerMovedIsRetriedAtOnce: an attempt ended because a newer map moved its segment
// away (runtime.ErrOwnerMoved) is retried with no backoff and no refresh when it was not
// sent or is safe to replay (idempotent, guarded); a sent, unguarded, non-idempotent one
// is in doubt (B2), never replayed.
func TestB6_OwnerMovedIsRetriedAtOnce(t *testing.T) {
	moved := &runtime.NodeError{Op: "Get", Node: 1, Addr: "node1:7001", Kind: runtime.ErrOwnerMoved,
		Err: fmt.Errorf("a newer cluster map names another owner")}
	tests := []struct {
		name    string
		call    func() *runtime.Call
		sent    bool
		inDoubt bool
	}{
		{"idempotent get, sent", func() *runtime.Call { return zt.GetCall("k") }, true, false},
		{"idempotent put, sent", func() *runtime.Call { return zt.PutCall("k", "v") }, true, false},
		{"guarded put, sent", func() *runtime.Call { return zt.GuardedPutCall("k", "v", 3) }, true, false},
		{"increment, queued", func() *runtime.Call { return zt.IncrementCall("n", 1) }, false, false},
		{"increment, sent", func() *runtime.Call { return zt.IncrementCall("n", 1) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStack(t, runtime.DefaultRetryPolicy, []mwt.Outcome{mwt.Fail(moved, tt.sent), mwt.Answer(zaris.KvStatus_Ok)})
			call := tt.call()
			resp, err := s.do(call)
			assert.Empty(t, s.refresher.Requests(), "the new map is already installed")
			assert.Empty(t, s.clock.Sleeps(), "no backoff")
			if tt.inDoubt {
				require.ErrorIs(t, err, runtime.ErrInDoubt)
				assert.ErrorIs(t, err, runtime.ErrOwnerMoved)
				assert.Equal(t, 1, s.transport.Attempts(), "not replayed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, zaris.KvStatus_Ok, kvStatus(resp))
			assert.Equal(t, 2, s.transport.Attempts())
			assert.Equal(t, runtime.Retry, call.Attempts[0].Class)
		})
	}
}
