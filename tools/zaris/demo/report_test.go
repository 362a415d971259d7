package demo

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The closing table names the waits for a new owner (rule B7): a column per phase and in
// total, and a line for each phase that had some; and a lost host's event line says when
// the store gave its segments away, how long it stayed lost and that it was replaced.
func TestWriteTableNamesOwnerWaitsAndTheLostHost(t *testing.T) {
	r := &Report{
		Events: []EventReport{{Kind: LostHost, Label: "lost-host n2", AtSec: 39, TookMs: 4600, NewOwnerMs: 3290, FailoverMs: 3310, LostMs: 4320}},
		Phases: []PhaseReport{{Name: "steady"}, {Name: "kill n3", OwnerWaitCalls: 5, OwnerWaits: 6, OwnerWaitMaxMs: 412.5}},
		Total:  PhaseReport{Name: "total", OwnerWaitCalls: 5, OwnerWaits: 6, OwnerWaitMaxMs: 412.5},
	}
	var b bytes.Buffer
	r.WriteTable(&b)
	out := b.String()
	assert.Contains(t, out, "owner waits calls/max ms")
	assert.Regexp(t, `kill n3 .* 5/412\s`, out)
	assert.Contains(t, out, "calls that waited for a new owner (rule B7")
	assert.Regexp(t, `kill n3\s+5 calls, 6 waits, longest 412.5 ms`, out)
	assert.Regexp(t, `total\s+5 calls, 6 waits, longest 412.5 ms`, out)
	assert.NotRegexp(t, `steady\s+\d+ calls`, out, "a phase without waits has no line")
	assert.Contains(t, out, "lost-host n2           done in 4600 ms, first new owner after 3290 ms, failed over after 3310 ms, lost for 4320 ms, then replaced")

	r.Phases[1].OwnerWaitCalls, r.Total.OwnerWaitCalls = 0, 0
	b.Reset()
	r.WriteTable(&b)
	assert.Contains(t, b.String(), "calls that waited for a new owner (rule B7): none")
}
