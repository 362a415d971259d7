package main

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/internal/thriftbuf"
)

// floorBudget is what reaching half the pipelined socket floor at the most callers
// measured (256 in make bench) would allow per call, against what the parts of a call no
// client can skip cost in the same run. Half the floor is within reach only if BudgetUs
// exceeds FloorUs plus CodecUs by enough for the client's stack, the node's lookup and
// waking each caller.
type floorBudget struct {
	// Callers is the number of callers the budget is for.
	Callers int `json:"callers"`
	// CPUs is the processors the process may use (GOMAXPROCS, at most the machine's).
	CPUs int `json:"cpus"`
	// FloorOpsPerS is the pipelined socket floor's throughput at Callers.
	FloorOpsPerS float64 `json:"floorOpsPerSec"`
	// BudgetUs is the CPU microseconds per call, client and node together, that leave the
	// process at half the floor with every processor busy: CPUs / (FloorOpsPerS / 2).
	BudgetUs float64 `json:"budgetMicrosPerCall"`
	// FloorUs is the floor's own CPU microseconds per request (writing, carrying and
	// reading it on loopback, both ends); a Get's bytes cost at least that.
	FloorUs float64 `json:"floorMicrosPerRequest"`
	// CodecUs is the CPU microseconds of the Thrift encoding and decoding of one Get on
	// both sides, in memory and on one goroutine: the request encoded, decoded by the
	// generated processor, answered by a handler that does nothing, the reply encoded and
	// decoded.
	CodecUs float64 `json:"codecMicrosPerCall"`
	// PipelinedUs is what the typed client pipelined spent per call at Callers, client
	// and node.
	PipelinedUs float64 `json:"pipelinedMicrosPerCall"`
}

// fixedGet answers every Get with the same response and nothing else; any other call
// panics on the nil interface, which the codec loop never makes.
type fixedGet struct {
	zaris.ZarisKv
	resp *zaris.GetResponse
}

func (f fixedGet) Get(context.Context, *zaris.GetRequest) (*zaris.GetResponse, error) {
	return f.resp, nil
}

// codecRounds is the rounds codecCost splits its calls into; the cheapest round counts,
// as the best round of each mode does in the section.
const codecRounds = 5

// codecCost returns the CPU microseconds per call of Gets encoded and decoded on both
// sides in memory (see floorBudget.CodecUs), binary as the bench's clients speak it, with
// the in-memory binary protocol the client and the node use on framed connections: n
// calls in codecRounds rounds, the cheapest round's cost per call.
func codecCost(ctx context.Context, n int) (float64, error) {
	best := 0.0
	for round := range codecRounds {
		us, err := codecRound(ctx, max(n/codecRounds, 1))
		if err != nil {
			return 0, err
		}
		if round == 0 || us < best {
			best = us
		}
	}
	return best, nil
}

// codecRound encodes and decodes n Gets and returns the process's CPU microseconds per call.
func codecRound(ctx context.Context, n int) (float64, error) {
	cfg := &thrift.TConfiguration{}
	client, node := thriftbuf.New(cfg), thriftbuf.New(cfg)
	proc := zaris.NewZarisKvProcessor(fixedGet{resp: &zaris.GetResponse{
		Status: zaris.KvStatus_Ok, Value: make([]byte, 100), Version: 7, MapEpoch: 3}})
	args := &zaris.ZarisKvGetArgs{Req: &zaris.GetRequest{Key: []byte("bench")}}
	var in bytes.Reader
	cpu0 := cpuTime()
	for i := range n {
		client.ResetOutput()
		if err := client.WriteMessageBegin(ctx, "Get", thrift.CALL, int32(i)); err != nil {
			return 0, err
		}
		if err := args.Write(ctx, client); err != nil {
			return 0, err
		}
		if err := client.WriteMessageEnd(ctx); err != nil {
			return 0, err
		}
		req := client.Bytes()
		node.Reset(nil)
		in.Reset(req)
		if err := node.Fill(&in, len(req)); err != nil {
			return 0, err
		}
		if ok, err := proc.Process(ctx, node, node); !ok || err != nil {
			return 0, fmt.Errorf("processing a Get in memory: %v", err)
		}
		reply := node.Bytes()
		in.Reset(reply)
		if err := client.Fill(&in, len(reply)); err != nil {
			return 0, err
		}
		if _, _, seq, err := client.ReadMessageBegin(ctx); err != nil || seq != int32(i) {
			return 0, fmt.Errorf("decoding a reply in memory: seqid %d, %v", seq, err)
		}
		var res zaris.ZarisKvGetResult
		if err := res.Read(ctx, client); err != nil {
			return 0, err
		}
		if err := client.ReadMessageEnd(ctx); err != nil {
			return 0, err
		}
		if res.Success.GetStatus() != zaris.KvStatus_Ok {
			return 0, fmt.Errorf("decoding a reply in memory: status %v", res.Success.GetStatus())
		}
	}
	return float64((cpuTime() - cpu0).Nanoseconds()) / 1e3 / float64(n), nil
}

// newFloorBudget computes the budget from the pipeline section's rows at the most callers
// and the codec's cost; it is zero if either row is missing.
func newFloorBudget(p *pipelineResult, codecUs float64) floorBudget {
	callers := 0
	for _, r := range p.Rows {
		callers = max(callers, r.Callers)
	}
	floor, piped := p.row(modeFloorPipe, callers), p.row(modeTypedPipe, callers)
	if floor == nil || piped == nil || floor.OpsPerS == 0 {
		return floorBudget{}
	}
	cpus := min(goruntime.GOMAXPROCS(0), goruntime.NumCPU())
	return floorBudget{
		Callers:      callers,
		CPUs:         cpus,
		FloorOpsPerS: floor.OpsPerS,
		BudgetUs:     float64(cpus) * 1e6 / (floor.OpsPerS / 2),
		FloorUs:      floor.CPUPer100k * 10, // seconds per 100,000 calls to µs per call
		CodecUs:      codecUs,
		PipelinedUs:  piped.CPUPer100k * 10,
	}
}
