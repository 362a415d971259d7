package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/clustron/zaris-go/runtime"
)

// An operation's kind is "read" or "write" as the IDL annotates it; the zero OpKind, an Op
// whose kind nobody set, is neither.
func TestOpKind_ZeroIsNeitherReadNorWrite(t *testing.T) {
	assert.Equal(t, "read", runtime.Read.String())
	assert.Equal(t, "write", runtime.Write.String())
	var unset runtime.OpKind
	assert.Equal(t, "unknown", unset.String())
	assert.NotEqual(t, runtime.Read, unset)
	assert.NotEqual(t, runtime.Write, unset)
}
