package proof

import (
	"fmt"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// opKind is the operation a history entry records.
type opKind int

const (
	opGet opKind = iota
	opPut
	opDelete
	opIncrement
)

func (k opKind) String() string {
	return [...]string{"get", "put", "delete", "incr"}[k]
}

// kvInput is an operation's input: the key and what the request carried.
type kvInput struct {
	kind     opKind
	key      string
	value    string // put
	ifMatch  int64  // put, delete: the guard, when hasMatch
	hasMatch bool
	ifAbsent bool  // put
	delta    int64 // increment
}

// outcome is what the application saw.
type outcome int

const (
	outOk outcome = iota
	outNotFound
	outConflict
	outInvalid
	// outUnknown: no answer (an error, or an attempt sent without a reply): possibly applied.
	outUnknown
)

func (o outcome) String() string {
	return [...]string{"Ok", "NotFound", "Conflict", "InvalidRequest", "?"}[o]
}

// kvOutput is an operation's answer: the status and what the response carried.
type kvOutput struct {
	out     outcome
	value   string // get Ok
	version int64  // get/put/delete Ok, conflict: the version answered
	sum     int64  // increment Ok
}

// kvState is one key's state in the model. version is the key's exact version when exact,
// else a strict lower bound of it (after a possibly-applied write whose version nobody saw,
// or after a delete, when the next version only has to be greater).
type kvState struct {
	exists  bool
	value   string
	version int64
	exact   bool
}

// seen reports whether version v is consistent with the state's version.
func (s kvState) seen(v int64) bool {
	if s.exact {
		return v == s.version
	}
	return v > s.version
}

// newer reports whether v may be the version of a write applied to s: versions only grow.
func (s kvState) newer(v int64) bool { return v > s.version }

// counter returns the key's value read as Increment reads it (a missing key counts as 0).
func (s kvState) counter() (int64, bool) {
	if !s.exists {
		return 0, true
	}
	n, err := strconv.ParseInt(s.value, 10, 64)
	return n, err == nil
}

// kvModel is the per-key model of a Zaris store, partitioned by key. A step returns every
// state the operation may leave (none when the answer is impossible); a possibly-applied
// operation may leave the state unchanged or applied.
var kvModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() []any { return []any{kvState{exact: true}} },
	Step: func(state, input, output any) []any {
		return step(state.(kvState), input.(kvInput), output.(kvOutput))
	},
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		var req string
		switch in.kind {
		case opGet:
			req = "get()"
		case opPut:
			req = fmt.Sprintf("put(%s)", in.value)
		case opDelete:
			req = "delete()"
		case opIncrement:
			req = fmt.Sprintf("incr(%d)", in.delta)
		}
		if in.hasMatch {
			req += fmt.Sprintf(" if v%d", in.ifMatch)
		}
		if in.ifAbsent {
			req += " if absent"
		}
		switch {
		case out.out == outOk && in.kind == opGet:
			return fmt.Sprintf("%s -> %s v%d", req, out.value, out.version)
		case out.out == outOk && in.kind == opIncrement:
			return fmt.Sprintf("%s -> %d v%d", req, out.sum, out.version)
		case out.out == outOk, out.out == outConflict:
			return fmt.Sprintf("%s -> %s v%d", req, out.out, out.version)
		}
		return fmt.Sprintf("%s -> %s", req, out.out)
	},
	DescribeState: func(state any) string {
		s := state.(kvState)
		rel := "="
		if !s.exact {
			rel = ">"
		}
		if !s.exists {
			return fmt.Sprintf("absent (v%s%d)", rel, s.version)
		}
		return fmt.Sprintf("%s (v%s%d)", s.value, rel, s.version)
	},
}

// step returns the states the operation in/out may leave s in.
func step(s kvState, in kvInput, out kvOutput) []any {
	var next []any
	ok := func(st kvState) { next = append(next, st) }
	switch in.kind {
	case opGet:
		switch out.out {
		case outOk:
			if s.exists && s.value == out.value && s.seen(out.version) {
				ok(kvState{exists: true, value: s.value, version: out.version, exact: true})
			}
		case outNotFound:
			if !s.exists {
				ok(s)
			}
		case outUnknown:
			ok(s)
		}
	case opPut:
		// guardHolds says whether the guard lets the write apply; it may be unknown (maybe)
		// when only a lower bound of the version is known.
		guardHolds, maybe := true, false
		switch {
		case in.ifAbsent:
			guardHolds = !s.exists
		case in.hasMatch:
			guardHolds = s.exists && s.exact && s.version == in.ifMatch
			maybe = s.exists && !s.exact && in.ifMatch > s.version
		}
		switch out.out {
		case outOk:
			if (guardHolds || maybe) && s.newer(out.version) && (!in.hasMatch || out.version > in.ifMatch) {
				ok(kvState{exists: true, value: in.value, version: out.version, exact: true})
			}
		case outConflict:
			if !guardHolds && (in.hasMatch || in.ifAbsent) {
				if !s.exists && out.version == 0 {
					ok(s)
				} else if s.exists && s.seen(out.version) && !(in.hasMatch && out.version == in.ifMatch) {
					ok(kvState{exists: true, value: s.value, version: out.version, exact: true})
				}
			}
		case outUnknown:
			ok(s)
			if guardHolds || maybe {
				lb := s.version
				if in.hasMatch {
					lb = in.ifMatch
				}
				ok(kvState{exists: true, value: in.value, version: lb, exact: false})
			}
		}
	case opDelete:
		guardHolds, maybe := s.exists, false
		if in.hasMatch {
			guardHolds = s.exists && s.exact && s.version == in.ifMatch
			maybe = s.exists && !s.exact && in.ifMatch > s.version
		}
		switch out.out {
		case outOk:
			// The answer carries the version the key had when it was deleted.
			if (guardHolds || maybe) && s.seen(out.version) && (!in.hasMatch || out.version == in.ifMatch) {
				ok(kvState{version: out.version})
			}
		case outNotFound:
			if !s.exists {
				ok(s)
			}
		case outConflict:
			if in.hasMatch && s.exists && !guardHolds && s.seen(out.version) && out.version != in.ifMatch {
				ok(kvState{exists: true, value: s.value, version: out.version, exact: true})
			}
		case outUnknown:
			ok(s)
			if guardHolds || maybe {
				ok(kvState{version: max(s.version, in.ifMatch)})
			}
		}
	case opIncrement:
		old, numeric := s.counter()
		switch out.out {
		case outOk:
			if numeric && out.sum == old+in.delta && s.newer(out.version) {
				ok(kvState{exists: true, value: strconv.FormatInt(out.sum, 10), version: out.version, exact: true})
			}
		case outInvalid:
			if !numeric {
				ok(s)
			}
		case outUnknown:
			ok(s)
			if numeric {
				ok(kvState{exists: true, value: strconv.FormatInt(old+in.delta, 10), version: s.version, exact: false})
			}
		}
	}
	return next
}
