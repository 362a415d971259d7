package runtime

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The status table answers by value what the IDL declares: the class, the slow factor and
// the name; a value it does not hold is Fatal and named by its number.
func TestStatusTable(t *testing.T) {
	tbl := NewStatusTable("Code", &StatusRoles{Ok: 0, Invalid: 1, Unanswered: 2}, []StatusInfo{
		{Value: 0, Name: "Fine", Class: Answer},
		{Value: 1, Name: "Bad", Class: Answer},
		{Value: 2, Name: "Busy", Class: Retry, SlowFactor: 5},
		{Value: 3, Name: "Elsewhere", Class: RefreshRetry},
		{Value: 1000, Name: "Far", Class: Retry},
		{Value: -1, Name: "Negative", Class: RefreshRetry},
	})
	for _, tt := range []struct {
		value  int64
		class  Class
		factor int
		name   string
	}{
		{0, Answer, 1, "Fine"}, {1, Answer, 1, "Bad"}, {2, Retry, 5, "Busy"}, {3, RefreshRetry, 1, "Elsewhere"},
		{1000, Retry, 1, "Far"}, {-1, RefreshRetry, 1, "Negative"}, {4, Fatal, 1, "Code(4)"}, {99, Fatal, 1, "Code(99)"},
	} {
		assert.Equal(t, tt.class, tbl.Class(tt.value), "class of %d", tt.value)
		assert.Equal(t, tt.factor, tbl.SlowFactor(tt.value), "factor of %d", tt.value)
		assert.Equal(t, tt.name, tbl.Name(tt.value))
		assert.Equal(t, tt.class == Answer, tbl.IsAnswer(tt.value))
	}
	roles, ok := tbl.Roles()
	assert.True(t, ok)
	assert.Equal(t, StatusRoles{Ok: 0, Invalid: 1, Unanswered: 2}, roles)
	assert.Equal(t, "Code", tbl.Enum())
	assert.Len(t, tbl.Statuses(), 6)

	var none *StatusTable
	assert.Equal(t, Fatal, none.Class(0), "no table: every status is Fatal")
	_, ok = NewStatusTable("Code", nil, []StatusInfo{{Value: 0, Name: "Fine", Class: Answer}}).Roles()
	assert.False(t, ok)
}

func TestStatusTable_RefusesAMalformedTable(t *testing.T) {
	fine := StatusInfo{Value: 0, Name: "Fine", Class: Answer}
	assert.Panics(t, func() { NewStatusTable("Code", nil, []StatusInfo{fine, {Value: 0, Name: "Other", Class: Retry}}) }, "value twice")
	assert.Panics(t, func() { NewStatusTable("Code", nil, []StatusInfo{fine, {Value: 1, Name: "Fine", Class: Retry}}) }, "name twice")
	assert.Panics(t, func() { NewStatusTable("Code", nil, []StatusInfo{{Value: 0, Name: "Fine", Class: Fatal}}) }, "class")
	assert.Panics(t, func() { NewStatusTable("Code", &StatusRoles{Ok: 7}, []StatusInfo{fine}) }, "role not in the table")
}

// A status table indexes the values 0..63 it holds in a dense slice sized by the largest
// of them, and looks any other value up by search: a large value (Thrift enums are i32)
// does not size the index.
func TestStatusTable_DenseIndexSpansTheSmallValues(t *testing.T) {
	for _, tc := range []struct {
		values []int64
		dense  int
	}{
		{[]int64{0, 64, 1 << 20}, 1},
		{[]int64{3, 0, 63, -1}, 64},
		{[]int64{64, 1000}, 0},
	} {
		var statuses []StatusInfo
		for _, v := range tc.values {
			statuses = append(statuses, StatusInfo{Name: "S" + strconv.FormatInt(v, 10), Value: v, Class: Answer})
		}
		table := NewStatusTable("E", nil, statuses)
		assert.Len(t, table.dense, tc.dense, "%v", tc.values)
		for _, v := range tc.values {
			assert.Equal(t, "S"+strconv.FormatInt(v, 10), table.Name(v))
		}
		assert.Equal(t, "E(5)", table.Name(5))
	}
}
