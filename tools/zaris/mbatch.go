package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/clustron/zaris-go/gen/zaris"
)

// The output of the multi-key commands (mget, mput): one item result per key, in the order
// given. Without --json each answered item is a line on stdout (mget: KEY=VALUE; mput:
// KEY ok version=N) and each other item a line on stderr. The command exits 0 when every
// item got an answer, whatever the answers, and 5 (gave up) when some did not.

// itemAnswer records item it's answer: status, version and the node's epoch, as result.answer
// does for one key, and the line describing it.
func itemAnswer(key string, status zaris.KvStatus, version, epoch int64) *result {
	ir := &result{Key: &key}
	ir.answer(status, version, epoch)
	return ir
}

// finishItems sets r from its items: exit 0 when every item got an answer, else gave up;
// and writes each item's line unless --json.
func (c *cli) finishItems(r *result) {
	missing := 0
	for _, ir := range r.Items {
		if ir.Status == statusGaveUp || ir.Status == statusError {
			missing++
		}
	}
	r.Status, r.Exit = zaris.KvStatus_Ok.String(), exitOK
	if missing > 0 {
		r.Status, r.Exit = statusGaveUp, exitGaveUp
		r.Error = fmt.Sprintf("%d of %d items got no answer", missing, len(r.Items))
	}
	if c.json {
		return
	}
	for _, ir := range r.Items {
		switch {
		case ir.Exit == exitOK:
			fmt.Fprintf(c.stdout, "%s\n", ir.out)
		case ir.brief != "":
			fmt.Fprintf(c.stderr, "zaris: %s %q: %s\n", r.Command, *ir.Key, ir.brief)
		default:
			fmt.Fprintf(c.stderr, "zaris: %s %q: %s\n", r.Command, *ir.Key, ir.Error)
		}
	}
}

// valueText is a value as the item line shows it: the string, or base64 when not UTF-8.
func valueText(ir *result) string {
	if ir.ValueBase64 != "" {
		return "base64:" + ir.ValueBase64
	}
	s, _ := ir.Value.(string)
	return s
}

// splitAssignments splits KEY=VALUE arguments at their first '='.
func splitAssignments(args []string) (keys, values []string, bad string) {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, nil, a
		}
		keys, values = append(keys, k), append(values, v)
	}
	return keys, values, ""
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
