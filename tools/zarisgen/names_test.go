package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The expected names are what thrift --gen go (0.17.0) writes for the same IDL names.
func TestGoName(t *testing.T) {
	for idl, want := range map[string]string{
		"key": "Key", "ifMatchVersion": "IfMatchVersion", "routing_key": "RoutingKey",
		"x_y_z": "XYZ", "a__b": "A_B", "a_1": "A_1", "id": "ID", "node_id": "NodeID",
		"url_path": "URLPath", "my_json": "MyJSON", "idle": "Idle", "gui": "Gui",
		"HTTPHost": "HTTPHost", "mapEpoch": "MapEpoch",
	} {
		assert.Equal(t, want, goName(idl), idl)
	}
	assert.Equal(t, "FooArgs_", goTypeName("FooArgs"))
	assert.Equal(t, "PutRequest", goTypeName("PutRequest"))
}
