package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleConnOK finds an open, quiet socket usable, and one whose peer sent bytes nobody
// asked for, or closed it, not.
func TestIdleConnOK_OpenAndQuietIsUsable(t *testing.T) {
	client, server := loopbackPair(t)
	assert.True(t, idleConnOK(client), "open and quiet")
	_, err := server.Write([]byte("x"))
	require.NoError(t, err)
	eventually(t, func() bool { return !idleConnOK(client) })

	client, server = loopbackPair(t)
	server.Close()
	eventually(t, func() bool { return !idleConnOK(client) })
}
