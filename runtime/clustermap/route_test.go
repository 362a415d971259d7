package clustermap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// NoNode is negative, the ids the engine refuses in a map, so it never names a node.
func TestNoNode_IsNoNodesID(t *testing.T) {
	assert.Negative(t, NoNode)
}
