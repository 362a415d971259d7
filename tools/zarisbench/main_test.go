package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/zaris/demo"
)

// TestQuickRunFillsEverySection runs every section at a tiny size and checks the shape of
// what comes out (the table and bench.json), never the numbers: CI machines are too noisy
// for timing assertions.
func TestQuickRunFillsEverySection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := quickConfig()
	var log strings.Builder
	res, err := run(ctx, cfg, &log)
	require.NoError(t, err, "%v\n%s", err, log.String())

	require.Len(t, res.Overhead, len(cfg.OverheadCallers))
	for _, o := range res.Overhead {
		assert.Positive(t, o.TypedOpsPerS)
		assert.Positive(t, o.RawOpsPerS)
		assert.Positive(t, o.RawAllocs)
	}
	require.Len(t, res.Protocols, len(protocolCombos))
	for _, p := range res.Protocols {
		assert.Greater(t, p.PutUp, float64(len(value)), "a Put carries its value: %+v", p)
		assert.Greater(t, p.GetDown, float64(len(value)), "a Get answer carries the value: %+v", p)
	}
	assert.Len(t, res.Scale.Callers, len(cfg.ScaleCallers))
	assert.Len(t, res.Scale.Nodes, len(cfg.ScaleNodes))
	assert.Positive(t, res.Scale.ConnBytes)
	assert.Equal(t, runtime.DefaultPipelineConns, res.Scale.PipelineConns, "the scale section's clients are pipelined")

	c := res.Churn
	assert.True(t, c.Verified, c.Problem)
	require.Len(t, c.Events, 3)
	assert.True(t, strings.HasPrefix(c.Events[1].Name, "kill"), c.Events[1].Name)
	assert.NotNil(t, c.Kill, "the kill's dead node is found")
	assert.Positive(t, c.Steady.DuringOpsPerS)
	kr := c.KillAfterRefresh
	require.NotNil(t, kr, "the kill after a refresh ran")
	assert.Equal(t, cfg.RefreshKillRounds, kr.Rounds)
	assert.Positive(t, kr.Keys)
	assert.Positive(t, kr.Calls, "calls ended after the kill")
	assert.Positive(t, kr.FailoverMs)

	s := res.Storm
	assert.Positive(t, s.Calls)
	assert.Equal(t, s.Calls, s.Failed, "no call on an ownerless segment succeeds")
	assert.Positive(t, s.HealthyDuring)
	assert.NotEmpty(t, res.Targets)
	require.Len(t, res.Pipeline.Rows, len(cfg.PipelineCallers)*len(pipelineModes))
	for _, r := range res.Pipeline.Rows {
		assert.Positive(t, r.OpsPerS, "%s at %d callers", r.Mode, r.Callers)
	}
	assert.Positive(t, res.Pipeline.HOL.PipedGetsPS)
	assert.Positive(t, res.Pipeline.HOL.PooledGetsPS)
	assert.Equal(t, cfg.PipelineCallers[len(cfg.PipelineCallers)-1], res.Pipeline.Budget.Callers)
	assert.Positive(t, res.Pipeline.Budget.CodecUs)

	br := res.Batch
	assert.Positive(t, br.MultiKeysPerS)
	assert.Positive(t, br.SequentialKeysPerS)
	assert.Positive(t, br.ConcurrentKeysPerS)
	require.Len(t, br.Events, 2)
	for _, e := range br.Events {
		assert.Positive(t, e.Calls, e.Name)
		assert.Zero(t, e.Stray, "%s: items retried outside the moved segments", e.Name)
	}
	require.Len(t, br.GetEvents, 2)
	for i, e := range br.GetEvents {
		assert.Equal(t, br.Events[i].Name, e.Name, "the same events")
		assert.Positive(t, e.Rounds, e.Name)
	}

	require.Len(t, res.Codec, 6, "four steps of a Get, their total, and the same in the compact protocol")
	assert.Equal(t, codecCompactTotal, res.Codec[5].Step)
	for _, r := range res.Codec {
		assert.Positive(t, r.LibNs, r.Step)
		assert.Positive(t, r.CodecNs, r.Step)
	}

	var table strings.Builder
	writeTable(&table, res)
	for _, want := range []string{"1. stack overhead", "2. protocols", "3. scale", "4. churn", "kill after a refresh: n", "5. refresh storm", "6. batch", "7. pipeline", "socket floor budget:", "8. codec", "9. client alone", "BenchmarkStackOverhead (go test", "targets:"} {
		assert.Contains(t, table.String(), want)
	}
	dir := t.TempDir()
	require.NoError(t, writeJSON(dir, res))
	b, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back))
	for _, k := range []string{"machine", "overhead", "protocols", "scale", "churn", "storm", "batch", "pipeline", "codec", "client", "targets"} {
		assert.Contains(t, back, k)
	}
}

// TestSectionsPrintsOnlyWhatRan runs one section and checks that the table has no other
// section's title, and that an unknown section is an error.
func TestSectionsPrintsOnlyWhatRan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := quickConfig()
	cfg.Sections = []string{"pipeline"}
	res, err := run(ctx, cfg, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"pipeline"}, res.Sections)
	var table strings.Builder
	writeTable(&table, res)
	assert.Contains(t, table.String(), "7. pipeline")
	for _, other := range []string{"1. stack overhead", "2. protocols", "3. scale", "4. churn", "5. refresh storm", "6. batch"} {
		assert.NotContains(t, table.String(), other)
	}

	cfg.Sections = []string{"pipelines"}
	_, err = run(ctx, cfg, io.Discard)
	assert.ErrorContains(t, err, `unknown section "pipelines"`)
}

// A kill that hit no segment measured nothing: its target is not kept, however fast the
// zero answers it waited for came.
func TestKillOfANodeWithoutSegmentsIsNotAPass(t *testing.T) {
	kill := func(segments int) target {
		res := &results{}
		res.Churn.Kill = &killResult{Node: "n3", Segments: segments, TargetMs: 350}
		for _, tg := range targets(res) {
			if strings.HasPrefix(tg.Name, "kill to first answer") {
				return tg
			}
		}
		t.Fatal("no kill target")
		return target{}
	}
	assert.False(t, kill(0).Holds, kill(0).Got)
	assert.Contains(t, kill(0).Got, "not measured")
	assert.True(t, kill(4).Holds, "four segments answered at once")
}

// A lost host's row compares the first answer on every one of its segments with the
// store's first map with new owners plus 600 ms, from the demo's event; a host that served
// no segment, or whose segments got no new owner while it was lost, measured nothing.
func TestLostHostRowIsTheNewOwnersMapPlus600ms(t *testing.T) {
	// Node 0 answers for segments 1 and 2 before the loss at 10 s; nodes 1 and 2 answer
	// for them 3.5 s and 3.9 s later; node 1 answers for segment 3 throughout.
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	as := []answer{
		{at: at(9.5), addr: 0, seg: 1}, {at: at(9.6), addr: 0, seg: 2}, {at: at(9.7), addr: 1, seg: 3},
		{at: at(11), addr: 1, seg: 3}, {at: at(13.5), addr: 1, seg: 1}, {at: at(13.9), addr: 2, seg: 2},
		{at: at(14.5), addr: 0, seg: 1}, // after the loss: the replacement, not counted
	}
	ev := demo.EventReport{Kind: demo.LostHost, Label: "lost-host n1", NewOwnerMs: 3300, FailoverMs: 3310, LostMs: 4320}
	k := lostHostEffect(as, []string{"n1", "n2", "n3"}, at(10), at(15), ev)
	require.NotNil(t, k)
	assert.Equal(t, "n1", k.Node)
	assert.Equal(t, 2, k.Segments)
	assert.InDelta(t, 3500, k.FirstMs, 0.001)
	assert.InDelta(t, 3900, k.AllMs, 0.001)
	assert.InDelta(t, 3900, k.TargetMs, 0.001, "new owners plus 600 ms")
	assert.InDelta(t, 3310, k.FailoverMs, 0.001)
	assert.InDelta(t, 4320, k.LostMs, 0.001)

	row := func(k *killResult) target {
		res := &results{}
		res.Churn.LostHost = k
		for _, tg := range targets(res) {
			if strings.HasPrefix(tg.Name, "lost host to first answer") {
				return tg
			}
		}
		t.Fatal("no lost host target")
		return target{}
	}
	assert.True(t, row(k).Holds, row(k).Got)
	late := *k
	late.AllMs = 3901
	assert.False(t, row(&late).Holds, row(&late).Got)
	none := *k
	none.Segments = 0
	assert.False(t, row(&none).Holds)
	assert.Contains(t, row(&none).Got, "not measured")
	noOwner := *k
	noOwner.NewOwnerMs, noOwner.TargetMs = 0, 0
	assert.False(t, row(&noOwner).Holds)
	assert.Contains(t, row(&noOwner).Got, "no map gave")
}

// The kill after a refresh holds only with calls measured and none failed.
func TestKillAfterRefreshRowWantsNoError(t *testing.T) {
	row := func(k refreshKillResult) target {
		res := &results{}
		res.Churn.KillAfterRefresh = &k
		for _, tg := range targets(res) {
			if tg.Name == "kill after a refresh: application errors" {
				return tg
			}
		}
		t.Fatal("no kill after a refresh target")
		return target{}
	}
	assert.True(t, row(refreshKillResult{Calls: 100}).Holds)
	assert.False(t, row(refreshKillResult{Calls: 100, CallErrors: 1}).Holds)
	assert.False(t, row(refreshKillResult{Calls: 100, OtherErrors: 1}).Holds)
	assert.False(t, row(refreshKillResult{}).Holds, "no call measured")
	assert.Equal(t, "1 of 100 calls (0 other errors)", row(refreshKillResult{Calls: 100, CallErrors: 1}).Got)
}

// The floor budget is the CPU per call that half the floor leaves on the process's
// processors, and what the floor and the codec cost of it, in microseconds.
func TestFloorBudgetIsHalfTheFloorsThroughputOnTheProcessors(t *testing.T) {
	p := &pipelineResult{Rows: []pipelineRow{
		{Mode: modeFloorPipe, Callers: 4, OpsPerS: 10, CPUPer100k: 9},
		{Mode: modeFloorPipe, Callers: 256, OpsPerS: 1e6, CPUPer100k: 0.05},
		{Mode: modeTypedPipe, Callers: 256, OpsPerS: 2e5, CPUPer100k: 0.6},
	}}
	b := newFloorBudget(p, 0.8)
	cpus := min(goruntime.GOMAXPROCS(0), goruntime.NumCPU())
	assert.Equal(t, 256, b.Callers)
	assert.Equal(t, cpus, b.CPUs)
	assert.InDelta(t, 2*float64(cpus), b.BudgetUs, 1e-9, "%d CPUs over 500,000 calls/s", cpus)
	assert.InDelta(t, 0.5, b.FloorUs, 1e-9)
	assert.InDelta(t, 6, b.PipelinedUs, 1e-9)
	assert.InDelta(t, 0.8, b.CodecUs, 1e-9)
	assert.Zero(t, newFloorBudget(&pipelineResult{Rows: p.Rows[:2]}, 0.8), "no pipelined row, no budget")
}

// The codec loop really encodes and decodes: its Gets come back answered, in sequence,
// and cost some CPU.
func TestCodecCostDecodesEveryReply(t *testing.T) {
	us, err := codecCost(context.Background(), 2000)
	require.NoError(t, err)
	assert.Positive(t, us)
}
