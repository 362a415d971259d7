package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/runtime/clustermap"
)

// Status names of a result that got no answer from the store.
const (
	// statusGaveUp: the call ended without an answer (*runtime.CallError), or no seed answered.
	statusGaveUp = "GaveUp"
	// statusError: anything else that went wrong.
	statusError = "Error"
)

// result is what a command reports: printed as one JSON object with --json, else as a line
// on stdout (success) or stderr (anything else).
type result struct {
	// Command is the command's name (empty, and left out, in an item of mget or mput).
	Command string `json:"command,omitempty"`
	// Key is the key the command worked on (nil for map).
	Key *string `json:"key,omitempty"`
	// Status is the store's answer (Ok, NotFound, Conflict, InvalidRequest), or GaveUp or
	// Error when none came.
	Status string `json:"status"`
	// Exit is the process's exit code.
	Exit int `json:"exit"`
	// Value is the value read (a string; ValueBase64 instead when it is not UTF-8) or the
	// counter after an incr (a number).
	Value any `json:"value,omitempty"`
	// ValueBase64 is a value that is not valid UTF-8, base64-encoded.
	ValueBase64 string `json:"valueBase64,omitempty"`
	// Version is the key's version after the write, the version read, or, on a Conflict,
	// the key's current version.
	Version *int64 `json:"version,omitempty"`
	// MapEpoch is the answering node's cluster-map epoch (for map, the map's epoch).
	MapEpoch *int64 `json:"mapEpoch,omitempty"`
	// Error says why the command failed.
	Error string `json:"error,omitempty"`
	// Bound names the bound that ended a call without an answer: maxAttempts, deadline,
	// retry budget, or none (a fatal error such as an in-doubt write).
	Bound string `json:"bound,omitempty"`
	// Map is the cluster map (the map command).
	Map *clustermap.Map `json:"map,omitempty"`
	// Items are the per-key results of mget and mput, in the order given.
	Items []*result `json:"items,omitempty"`
	// Stats is what the call cost (--stats).
	Stats *callStats `json:"stats,omitempty"`

	// out is the human-readable output of a success, printed on stdout without --json.
	out string
	// brief is a shorter Error for the stderr line, when there is one.
	brief string
}

// setValue stores a value read from the store.
func (r *result) setValue(v []byte) {
	if utf8.Valid(v) {
		r.Value = string(v)
	} else {
		r.ValueBase64 = base64.StdEncoding.EncodeToString(v)
	}
}

// answer records the store's answer and picks the exit code. Ok is for the command to
// describe (r.out); the other answers get their error text here.
func (r *result) answer(status zaris.KvStatus, version, epoch int64) {
	r.Status = status.String()
	r.MapEpoch = &epoch
	switch status {
	case zaris.KvStatus_Ok:
		r.Exit = exitOK
		r.Version = &version
	case zaris.KvStatus_NotFound:
		r.Exit = exitNotFound
		r.Error = "not found"
	case zaris.KvStatus_Conflict:
		r.Exit = exitConflict
		r.Version = &version
		r.Error = fmt.Sprintf("conflict: the key's current version is %d", version)
	case zaris.KvStatus_InvalidRequest:
		r.Exit = exitInvalid
		r.Error = "invalid request (empty or oversized key or value, or an increment of a value that is not a number)"
	default:
		r.Exit = exitError
		r.Error = "unexpected status " + status.String()
	}
}

// fail records a call that got no answer: a *runtime.CallError is exitGaveUp, anything
// else exitError.
func (r *result) fail(err error) {
	r.Error = reason(err)
	var ce *runtime.CallError
	if errors.As(err, &ce) {
		r.Status = statusGaveUp
		r.Exit = exitGaveUp
		r.Bound = ce.Bound.String()
		r.brief = briefCallError(ce)
		return
	}
	r.Status = statusError
	r.Exit = exitError
}

// briefCallError describes a call that got no answer in one line: how it ended and the
// last cause, without the attempt history that CallError.Error lists (--stats shows it).
func briefCallError(ce *runtime.CallError) string {
	var how string
	n := len(ce.Attempts)
	switch ce.Bound {
	case runtime.BoundAttempts:
		how = fmt.Sprintf("gave up after %d of %d attempts", n, ce.MaxAttempts)
	case runtime.BoundDeadline:
		how = fmt.Sprintf("deadline passed after %d attempts", n)
	case runtime.BoundBudget:
		how = fmt.Sprintf("retry budget exhausted after %d attempts", n)
	case runtime.BoundNone:
		how = fmt.Sprintf("failed on attempt %d", n)
		if n == 0 {
			how = "ended before its first attempt"
		}
	}
	how += " in " + ce.Elapsed.Round(time.Millisecond).String()
	if ce.Err != nil {
		// The causes nest errors that each start with "zaris: "; once is enough.
		how += ": " + strings.ReplaceAll(ce.Err.Error(), "zaris: ", "")
	}
	return how
}

// reason is err's text without the "zaris: " that the client's errors start with.
func reason(err error) string { return strings.TrimPrefix(err.Error(), "zaris: ") }

// finish prints r and returns its exit code: with --json one JSON object on stdout (and the
// error, if any, on stderr too); else the success output on stdout or the error on stderr,
// then the stats on stderr with --stats.
func (c *cli) finish(r *result, stats *callStats) int {
	if c.stats {
		r.Stats = stats
	}
	if r.Exit != exitOK {
		what := r.Command
		if r.Key != nil {
			what += fmt.Sprintf(" %q", *r.Key)
		}
		msg := r.Error
		if r.brief != "" {
			msg = r.brief
			if !c.stats {
				msg += " (--stats lists every attempt)"
			}
		}
		fmt.Fprintf(c.stderr, "zaris: %s: %s\n", what, msg)
	}
	if c.json {
		b, err := json.Marshal(r)
		if err != nil {
			fmt.Fprintf(c.stderr, "zaris: encoding the result: %v\n", err)
			return exitError
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
		return r.Exit
	}
	if r.Exit == exitOK && r.out != "" {
		fmt.Fprintln(c.stdout, r.out)
	}
	if c.stats && stats != nil {
		stats.print(c.stderr)
	}
	return r.Exit
}

// callStats is what one call cost, and the bootstrap before it: --stats prints it.
type callStats struct {
	// Bootstrap is what fetching the first map cost.
	Bootstrap *bootstrapStats `json:"bootstrap,omitempty"`
	// Attempts is the number of attempts made.
	Attempts int `json:"attempts"`
	// RefreshesRequested counts the map refreshes the call asked for.
	RefreshesRequested int `json:"refreshesRequested"`
	// RefreshesPerformed counts those that fetched a map.
	RefreshesPerformed int `json:"refreshesPerformed"`
	// BackoffMS is the time spent waiting between attempts, in milliseconds.
	BackoffMS float64 `json:"backoffMs"`
	// Statuses is each attempt's outcome in order: a status name (Ok, Moved, ...) or the
	// kind of error (NodeUnavailable, PartitionUnavailable, Transport, AttemptTimeout,
	// InDoubt, Canceled, DeadlineExceeded, Error).
	Statuses []string `json:"statuses"`
	// History is every attempt in detail.
	History []attemptStats `json:"history"`
	// Batch is what a multi-key call cost (mget, mput); its attempts are one per sub-request.
	Batch *batchStats `json:"batch,omitempty"`

	// noCall marks stats of a run whose bootstrap failed: no call was made.
	noCall bool
}

// bootstrapStats is what fetching the first map cost: the seeds asked, in order, until one
// answered or none was left (or the --timeout passed).
type bootstrapStats struct {
	// ElapsedMS is the bootstrap's time, in milliseconds.
	ElapsedMS float64 `json:"elapsedMs"`
	// Seeds are the seeds asked, in order.
	Seeds []seedStats `json:"seeds"`
}

// seedStats is one seed asked for the first map.
type seedStats struct {
	// Addr is the seed's host:port.
	Addr string `json:"addr"`
	// Outcome is Ok, or how the seed failed (seedOutcome): Refused, Closed, AttemptTimeout,
	// DeadlineExceeded, Canceled or Error.
	Outcome string `json:"outcome"`
	// Error is the seed's error, when it failed.
	Error string `json:"error,omitempty"`
	// DurationMS is the time spent on the seed, in milliseconds.
	DurationMS float64 `json:"durationMs"`
}

// batchStats is what a multi-key call cost besides its sub-requests (runtime.BatchStats).
type batchStats struct {
	// Rounds counts the rounds of sub-requests: 1 when no item met churn.
	Rounds int `json:"rounds"`
	// SubRequests counts the sub-requests, one per owner per round.
	SubRequests int `json:"subRequests"`
	// ItemsRetried counts item retries.
	ItemsRetried int `json:"itemsRetried"`
}

// attemptStats is one attempt of a call.
type attemptStats struct {
	// N is the attempt's number, from 1.
	N int `json:"n"`
	// Node is the node the attempt was routed to, or -1 for none.
	Node int32 `json:"node"`
	// Addr is that node's host:port.
	Addr string `json:"addr,omitempty"`
	// MapEpoch is the epoch of the client's map the attempt was routed with.
	MapEpoch int64 `json:"mapEpoch"`
	// Outcome is the status or the kind of error, as in callStats.Statuses.
	Outcome string `json:"outcome"`
	// AnswerEpoch is the answering node's map epoch, when it answered.
	AnswerEpoch int64 `json:"answerEpoch,omitempty"`
	// Class is how the client judged the outcome: answer, retry, refresh-retry or fatal.
	Class string `json:"class"`
	// Error is the attempt's error, when no response came.
	Error string `json:"error,omitempty"`
	// DurationMS is the attempt's time on the wire, in milliseconds.
	DurationMS float64 `json:"durationMs"`
}

// newCallStats reads a finished call's attempts and counters.
func newCallStats(call *runtime.Call) *callStats {
	s := &callStats{
		Attempts:           len(call.Attempts),
		RefreshesRequested: call.Stats.RefreshesRequested,
		RefreshesPerformed: call.Stats.RefreshesPerformed,
		BackoffMS:          ms(call.Stats.Backoff),
		Statuses:           []string{},
		History:            []attemptStats{},
	}
	if call.Batch != nil {
		st := call.Batch.Stats
		s.Batch = &batchStats{Rounds: st.Rounds, SubRequests: st.SubRequests, ItemsRetried: st.ItemsRetried}
	}
	for _, a := range call.Attempts {
		as := attemptStats{
			N: a.N, Node: a.Node, Addr: a.Addr, MapEpoch: a.MapEpoch,
			Outcome: outcome(a), Class: a.Class.String(), DurationMS: ms(a.Duration),
		}
		if a.Answered {
			as.AnswerEpoch = a.AnswerEpoch
		} else if a.Err != nil {
			as.Error = a.Err.Error()
		}
		s.Statuses = append(s.Statuses, as.Outcome)
		s.History = append(s.History, as)
	}
	return s
}

// outcome names an attempt's outcome: its status, or the kind of its error.
func outcome(a runtime.Attempt) string {
	if a.Answered {
		return zarisclient.Statuses.Name(int64(a.Status))
	}
	kinds := []struct {
		err  error
		name string
	}{
		{runtime.ErrInDoubt, "InDoubt"},
		{runtime.ErrNodeUnavailable, "NodeUnavailable"},
		{runtime.ErrPartitionUnavailable, "PartitionUnavailable"},
		{runtime.ErrAttemptTimeout, "AttemptTimeout"},
		{runtime.ErrOwnerMoved, "OwnerMoved"},
		{runtime.ErrTransport, "Transport"},
		{runtime.ErrRequestTooLarge, "RequestTooLarge"},
		{runtime.ErrRetryBudgetExhausted, "RetryBudgetExhausted"},
		{runtime.ErrClosed, "Closed"},
		{context.Canceled, "Canceled"},
		{context.DeadlineExceeded, "DeadlineExceeded"},
	}
	for _, k := range kinds {
		if errors.Is(a.Err, k.err) {
			return k.name
		}
	}
	if a.Err == nil {
		return "None"
	}
	return "Error"
}

// print writes the stats for a human: the bootstrap's line and one line per seed asked,
// then, when a call was made, a summary line and one line per attempt.
func (s *callStats) print(w io.Writer) {
	if b := s.Bootstrap; b != nil {
		fmt.Fprintf(w, "bootstrap: seeds asked=%d time=%s\n", len(b.Seeds), time.Duration(b.ElapsedMS*float64(time.Millisecond)).Round(time.Microsecond))
		for _, sd := range b.Seeds {
			line := fmt.Sprintf("  seed %s: %s %.2fms", sd.Addr, sd.Outcome, sd.DurationMS)
			if sd.Error != "" {
				line += ": " + sd.Error
			}
			fmt.Fprintln(w, line)
		}
	}
	if s.noCall {
		return
	}
	fmt.Fprintf(w, "stats: attempts=%d refreshes requested=%d performed=%d backoff=%s statuses=%s\n",
		s.Attempts, s.RefreshesRequested, s.RefreshesPerformed,
		time.Duration(s.BackoffMS*float64(time.Millisecond)).Round(time.Microsecond),
		strings.Join(s.Statuses, ","))
	if s.Batch != nil {
		fmt.Fprintf(w, "batch: rounds=%d sub-requests=%d items retried=%d\n", s.Batch.Rounds, s.Batch.SubRequests, s.Batch.ItemsRetried)
	}
	for _, a := range s.History {
		node := "no node"
		if a.Node != clustermap.NoNode {
			node = fmt.Sprintf("node %d (%s)", a.Node, a.Addr)
		}
		line := fmt.Sprintf("  attempt %d: %s map epoch %d: %s", a.N, node, a.MapEpoch, a.Outcome)
		if a.AnswerEpoch != 0 {
			line += fmt.Sprintf(" (node epoch %d)", a.AnswerEpoch)
		}
		line += fmt.Sprintf(" [%s] %.2fms", a.Class, a.DurationMS)
		if a.Error != "" {
			line += ": " + a.Error
		}
		fmt.Fprintln(w, line)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
