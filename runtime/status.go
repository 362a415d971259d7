package runtime

import (
	"fmt"
	"strconv"
)

// Status is a value of a service's status enum, as field 1 of its responses carries it;
// the service's StatusTable names and classifies it.
type Status int64

// StatusInfo is one value of a service's status enum and how the client treats an answer
// carrying it.
type StatusInfo struct {
	// Value is the enum value on the wire.
	Value int64
	// Name is the value's name in the IDL.
	Name string
	// Class is Answer, Retry or RefreshRetry (rules R1, R2, R8).
	Class Class
	// SlowFactor, when above 1, multiplies the backoff before the attempt that follows
	// an answer with this status (rule R5); 0 or 1 means the plain backoff.
	SlowFactor int
}

// StatusRoles names the status values the multi-key engine gives meaning to.
type StatusRoles struct {
	// Ok is the status of a multi-key response whose items the node judged one by one.
	Ok int64
	// Invalid is the answer the client gives, unsent, to an item without a routing key.
	Invalid int64
	// Unanswered is the status of a multi-key result for an item no node answered.
	Unanswered int64
}

// StatusTable is the class table of a service's status enum: which values are answers,
// which are retried, which are retried after a map refresh, and which back off slower.
// zarisgen generates it from the annotations on the IDL's status enum; every operation
// descriptor (Op.Statuses) points at it, and the middleware classifies by it. A value
// missing from the table is Fatal. A StatusTable is immutable and safe for concurrent use.
type StatusTable struct {
	enum     string
	statuses []StatusInfo
	dense    []int32 // index+1 into statuses by value, for values 0..len-1; 0: not there
	roles    *StatusRoles
}

// NewStatusTable returns the table of the enum named enum; roles is nil for a service
// without multi-key operations. It panics when a value or a name appears twice, a class is
// not Answer, Retry or RefreshRetry, or a role names a value that is not in statuses
// (zarisgen refuses such an IDL before it gets here).
func NewStatusTable(enum string, roles *StatusRoles, statuses []StatusInfo) *StatusTable {
	t := &StatusTable{enum: enum, statuses: append([]StatusInfo(nil), statuses...), roles: roles}
	seen := map[string]bool{}
	var maxDense int64 = -1
	for i, s := range t.statuses {
		switch s.Class {
		case Answer, Retry, RefreshRetry:
		default:
			panic(fmt.Sprintf("zaris: status table %s: %s has class %s", enum, s.Name, s.Class))
		}
		if seen[s.Name] {
			panic(fmt.Sprintf("zaris: status table %s: %s appears twice", enum, s.Name))
		}
		seen[s.Name] = true
		if _, ok := t.find(s.Value, i); ok {
			panic(fmt.Sprintf("zaris: status table %s: value %d appears twice", enum, s.Value))
		}
		if s.Value >= 0 && s.Value < 64 {
			maxDense = max(maxDense, s.Value)
		}
	}
	t.dense = make([]int32, maxDense+1)
	for i, s := range t.statuses {
		if s.Value >= 0 && s.Value <= maxDense {
			t.dense[s.Value] = int32(i + 1)
		}
	}
	if roles != nil {
		for _, v := range []int64{roles.Ok, roles.Invalid, roles.Unanswered} {
			if t.lookup(v) == nil {
				panic(fmt.Sprintf("zaris: status table %s: role value %d is not in the table", enum, v))
			}
		}
	}
	return t
}

// find looks value up among the first n statuses.
func (t *StatusTable) find(value int64, n int) (int, bool) {
	for i := range n {
		if t.statuses[i].Value == value {
			return i, true
		}
	}
	return 0, false
}

// lookup returns the entry of value, or nil.
func (t *StatusTable) lookup(value int64) *StatusInfo {
	if t == nil {
		return nil
	}
	if value >= 0 && value < int64(len(t.dense)) {
		if i := t.dense[value]; i > 0 {
			return &t.statuses[i-1]
		}
		return nil
	}
	if i, ok := t.find(value, len(t.statuses)); ok {
		return &t.statuses[i]
	}
	return nil
}

// Enum returns the IDL name of the status enum.
func (t *StatusTable) Enum() string { return t.enum }

// Statuses returns a copy of every entry, in IDL order.
func (t *StatusTable) Statuses() []StatusInfo { return append([]StatusInfo(nil), t.statuses...) }

// Roles returns the values the multi-key engine gives meaning to, and false when the
// table has none (the IDL declares no multi-key operation).
func (t *StatusTable) Roles() (StatusRoles, bool) {
	if t == nil || t.roles == nil {
		return StatusRoles{}, false
	}
	return *t.roles, true
}

// Class returns the class of an answer carrying value: Fatal for a value the table does
// not hold (a newer server's status), or when t is nil.
func (t *StatusTable) Class(value int64) Class {
	if s := t.lookup(value); s != nil {
		return s.Class
	}
	return Fatal
}

// IsAnswer reports whether value is an answer for the application (rule R8).
func (t *StatusTable) IsAnswer(value int64) bool { return t.Class(value) == Answer }

// SlowFactor returns what the backoff after an answer carrying value is multiplied by
// (rule R5): the factor the IDL declares, or 1.
func (t *StatusTable) SlowFactor(value int64) int {
	if s := t.lookup(value); s != nil && s.SlowFactor > 1 {
		return s.SlowFactor
	}
	return 1
}

// Name returns the IDL name of value, or Enum(value) for a value the table does not hold.
func (t *StatusTable) Name(value int64) string {
	if s := t.lookup(value); s != nil {
		return s.Name
	}
	enum := "status"
	if t != nil {
		enum = t.enum
	}
	return enum + "(" + strconv.FormatInt(value, 10) + ")"
}
