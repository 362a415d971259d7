package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain serves the client section's node when the test binary is started as its child.
func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) != "" {
		os.Exit(serveNode())
	}
	os.Exit(m.Run())
}

// The client section measures in this process only what the client does: its node runs in
// a child, whose CPU time comes back, and the floor's echo server with it.
func TestClientSectionSplitsClientAndNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := clientCost(ctx, []int{1}, []int{4}, 1, 100*time.Millisecond, 1000, []string{"-benchtime", "20x", "-count", "1"})
	require.NoError(t, err)
	require.Len(t, res.Allocs, 1)
	assert.Positive(t, res.Allocs[0].Allocs)
	require.Len(t, res.CPU, 1)
	r := res.CPU[0]
	assert.Positive(t, r.ClientUs)
	assert.Positive(t, r.NodeUs, "the node's CPU is the child's")
	assert.Positive(t, r.FloorClientUs)
	assert.Positive(t, r.FloorNodeUs, "the echo server is the child's")
	assert.Positive(t, r.CodecClientUs)
	assert.Positive(t, r.CodecNodeUs)
	assert.GreaterOrEqual(t, r.Depth, 1)
	assert.Empty(t, res.Stack.Error)
	assert.Equal(t, 1, res.Stack.Counts)
	assert.Positive(t, res.Stack.TypedNs)
	assert.Positive(t, res.Stack.RawAllocs)
	assert.Positive(t, res.Stack.TypedAllocs)
	// The Call is reused and the generated codec decodes with fewer allocations than the raw
	// client's Thrift library: at most the Call more (TestStackAddsOneAllocation).
	assert.LessOrEqual(t, res.Stack.TypedAllocs, res.Stack.RawAllocs+1, "at most the Call more")
}

// Each client row keeps its target: a row over it is a MISS, and a stack benchmark that did
// not run is never a pass.
func TestClientTargetsMissHonestly(t *testing.T) {
	c := clientResult{Rounds: 1,
		Allocs: []clientAllocRow{{Callers: 1, Allocs: 3, Bytes: 200}, {Callers: 64, Allocs: 3, Bytes: 201}},
		CPU:    []clientCPURow{{Callers: 64, ClientRatio: 1.5, TotalRatio: 9}, {Callers: 256, ClientRatio: 1.51, TotalRatio: 2}},
		Stack:  stackOverheadResult{Counts: 1, AddedNs: 600, AddedAllocs: 2}}
	got := map[string]bool{}
	for _, tg := range clientTargets(&c) {
		got[tg.Name] = tg.Holds
	}
	assert.Equal(t, map[string]bool{
		"client allocs and bytes per Get, 1 caller (node in a process of its own)":   true,
		"client allocs and bytes per Get, 64 callers (node in a process of its own)": false,
		"client CPU per call pipelined over its floor, 64 callers":                   true,
		"client CPU per call pipelined over its floor, 256 callers":                  false,
		"client + node CPU per call over their floor, 256 callers":                   true,
		"BenchmarkStackOverhead: the stack's time per call":                          true,
		"BenchmarkStackOverhead: allocs in the stack beyond the Call":                false,
	}, got)

	c.Stack = stackOverheadResult{Error: "go test: exit status 1"}
	for _, tg := range clientTargets(&c) {
		if strings.HasPrefix(tg.Name, "BenchmarkStackOverhead") {
			assert.False(t, tg.Holds, tg.Got)
			assert.Contains(t, tg.Got, "not measured")
		}
	}
}
